package capacityscheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quotascale/quotascale/quota/gang"
	"github.com/quotascale/quotascale/quota/resources"
)

// reservation is the quota an admitted gang holds as one: charged to the tree
// under the gang's own UID when its first member is reserved, for the whole
// gang. Each member reserved afterwards takes its share out of it, so usage
// does not change while the gang fills up, and no other pod can take the room
// the gang still waits for. It ends, releasing what is left, when MinCount
// members are bound, or when no member is reserved or bound any more: the
// gang's wait at Permit ended without it, or its scheduling cycle was undone.
type reservation struct {
	key       gang.Key
	minCount  int32
	namespace string
	// remaining is what is still reserved for members not reserved yet.
	remaining corev1.ResourceList
	// reserved are members past Reserve and not seen bound; bound are
	// members the informer shows on a node.
	reserved sets.Set[types.UID]
	bound    sets.Set[types.UID]
}

// reservationUID is the UID a gang's reservation is charged under, distinct
// from any pod's and any reclaim hold's.
func reservationUID(key gang.Key) types.UID {
	return types.UID("gang-reservation/" + string(key.Kind) + "/" + key.String())
}

// gangIndex keeps the live pods of every gang, by gang, as the pod informer
// delivers them: PreFilter reads a gang's members without listing every pod.
type gangIndex map[gang.Key]map[types.UID]*corev1.Pod

func (ix gangIndex) update(pod *corev1.Pod) {
	key, ok := gang.RefOf(pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil || resources.PodFinished(pod) {
		ix.remove(pod)
		return
	}
	members := ix[key]
	if members == nil {
		members = map[types.UID]*corev1.Pod{}
		ix[key] = members
	}
	members[pod.UID] = pod
}

func (ix gangIndex) remove(pod *corev1.Pod) {
	key, ok := gang.RefOf(pod)
	if !ok {
		return
	}
	delete(ix[key], pod.UID)
	if len(ix[key]) == 0 {
		delete(ix, key)
	}
}

// pods are the gang's pods in no particular order (gang.Members orders them).
func (ix gangIndex) pods(key gang.Key) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(ix[key]))
	for _, p := range ix[key] {
		out = append(out, p)
	}
	return out
}

// followGangLocked keeps the gang index and reservations in step with a pod
// the informer delivered: a reserved member seen bound counts as bound, and
// the reservation ends once MinCount members are.
func (c *quotaCache) followGangLocked(pod *corev1.Pod) {
	c.gangPods.update(pod)
	key, ok := gang.RefOf(pod)
	if !ok {
		return
	}
	delete(c.gangAsked, key)
	r := c.reservations[key]
	if r == nil {
		return
	}
	switch {
	case pod.DeletionTimestamp != nil || resources.PodFinished(pod):
		r.reserved.Delete(pod.UID)
		r.bound.Delete(pod.UID)
	case pod.Spec.NodeName != "":
		r.reserved.Delete(pod.UID)
		r.bound.Insert(pod.UID)
	}
	c.settleReservationLocked(r)
}

// forgetGangPodLocked drops a deleted pod from its gang.
func (c *quotaCache) forgetGangPodLocked(pod *corev1.Pod) {
	c.gangPods.remove(pod)
	key, ok := gang.RefOf(pod)
	if !ok {
		return
	}
	delete(c.gangAsked, key)
	if r := c.reservations[key]; r != nil {
		r.reserved.Delete(pod.UID)
		r.bound.Delete(pod.UID)
		c.settleReservationLocked(r)
	}
}

// settleReservationLocked ends a reservation whose gang is wholly bound, or
// that no member holds any more.
func (c *quotaCache) settleReservationLocked(r *reservation) {
	if r.bound.Len() >= int(r.minCount) || r.reserved.Len()+r.bound.Len() == 0 {
		c.endReservationLocked(r.key)
	}
}

func (c *quotaCache) endReservationLocked(key gang.Key) {
	if _, ok := c.reservations[key]; !ok {
		return
	}
	delete(c.reservations, key)
	if c.tree != nil {
		c.releaseLocked(reservationUID(key))
	}
}

// reserveMemberLocked charges a member of an admitted gang. The first member
// opens the reservation for the whole gang (whole, this member included);
// each member takes its own requests out of it.
func (c *quotaCache) reserveMemberLocked(pod *corev1.Pod, key gang.Key, minCount int32, whole, requests corev1.ResourceList) {
	r := c.reservations[key]
	if r == nil {
		r = &reservation{key: key, minCount: minCount, namespace: pod.Namespace, remaining: whole,
			reserved: sets.New[types.UID](), bound: sets.New[types.UID]()}
		c.reservations[key] = r
		// The reservation takes over the room reclaims held for the gang.
		for preemptor, h := range c.holds {
			if h.gang == key {
				c.endHoldLocked(preemptor)
			}
		}
	}
	delete(c.gangAsked, key)
	r.remaining = subtractFloored(r.remaining, requests)
	r.reserved.Insert(pod.UID)
	c.tree.AddRequests(reservationUID(key), r.namespace, r.remaining)
	c.reserveLocked(pod, requests)
}

// unreserveMemberLocked undoes reserveMemberLocked for a member whose binding
// failed or whose wait at Permit ended: its share goes back to the
// reservation while other members hold it, and the reservation ends with the
// last of them. It returns the other members still reserved, which the
// caller rejects: a gang that lost a member before it was whole waits whole
// again rather than holding quota for part of itself.
func (c *quotaCache) unreserveMemberLocked(pod *corev1.Pod) gangRelease {
	key, ok := gang.RefOf(pod)
	if !ok {
		return gangRelease{}
	}
	delete(c.gangAsked, key)
	r := c.reservations[key]
	if r == nil || !r.reserved.Has(pod.UID) {
		return gangRelease{}
	}
	r.reserved.Delete(pod.UID)
	if r.reserved.Len()+r.bound.Len() == 0 {
		c.endReservationLocked(key)
		return gangRelease{activate: c.refusedGangPodsLocked()}
	}
	r.remaining = addLists(r.remaining, c.requestLocked(pod).Requests())
	c.tree.AddRequests(reservationUID(key), r.namespace, r.remaining)
	if r.bound.Len() > 0 {
		// Part of the gang already runs: the rest waits for this member.
		return gangRelease{}
	}
	return gangRelease{reject: r.reserved.UnsortedList()}
}

// gangRelease is what the plugin does after a member left a reservation:
// reject the gang's other members waiting at Permit, or, once the
// reservation ended, move the pods of the gangs quota refused back to the
// active queue. No cluster event says the quota came free.
type gangRelease struct {
	reject   []types.UID
	activate map[string]*corev1.Pod
}

// refusedGangPodsLocked are the pending pods of the gangs PreFilter last
// refused, by namespace/name.
func (c *quotaCache) refusedGangPodsLocked() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for key := range c.gangRefusals {
		for _, p := range c.gangPods[key] {
			if p.Spec.NodeName == "" {
				out[p.Namespace+"/"+p.Name] = p
			}
		}
	}
	return out
}

// subtractFloored is a - b per resource, never below zero, as a new list.
func subtractFloored(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a))
	for name, q := range a {
		units := resources.FlooredSub(resources.Units(name, q), resources.Units(name, b[name]))
		out[name] = resources.Quantity(name, units)
	}
	return out
}

// addLists is a + b per resource, as a new list.
func addLists(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for name, q := range a {
		out[name] = q.DeepCopy()
	}
	for name, q := range b {
		units := resources.SaturatingAdd(resources.Units(name, out[name]), resources.Units(name, q))
		out[name] = resources.Quantity(name, units)
	}
	return out
}
