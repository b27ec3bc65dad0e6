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
	// heldFor are the preemptors whose reclaim holds the reservation took
	// over (takeOverHoldsLocked).
	heldFor []types.UID
}

// reservationUIDPrefix starts the UID a gang's reservation is charged under.
const reservationUIDPrefix = "gang-reservation/"

// reservationUID is the UID a gang's reservation is charged under, distinct
// from any pod's and any reclaim hold's.
func reservationUID(key gang.Key) types.UID {
	return types.UID(reservationUIDPrefix + string(key.Kind) + "/" + key.String())
}

// followGangLocked keeps the gang index and reservations in step with a pod
// the informer delivered: a reserved member seen bound counts as bound, and
// the reservation ends once MinCount members are. A pod that left its gang
// (relabelled, finished, being deleted) leaves it here too.
func (c *quotaCache) followGangLocked(pod *corev1.Pod) {
	if left, moved := c.gangPods.update(pod); moved {
		c.leaveGangLocked(left, pod.UID)
	}
	key, ok := c.gangPods.keyOfPod(pod.UID)
	if !ok {
		return
	}
	delete(c.gangAsked, key)
	r := c.reservations[key]
	if r == nil {
		return
	}
	if pod.Spec.NodeName != "" {
		r.reserved.Delete(pod.UID)
		r.bound.Insert(pod.UID)
	}
	c.settleReservationLocked(r)
}

// forgetGangPodLocked drops a deleted pod from the gang it was filed under,
// whatever its last labels say.
func (c *quotaCache) forgetGangPodLocked(pod *corev1.Pod) {
	if key, ok := c.gangPods.remove(pod.UID); ok {
		c.leaveGangLocked(key, pod.UID)
	}
}

// leaveGangLocked forgets the pod of uid as a member of gang key. A gang
// with no live pod left is forgotten whole: its refusal and its report of
// never fitting go with it.
func (c *quotaCache) leaveGangLocked(key gang.Key, uid types.UID) {
	delete(c.gangAsked, key)
	if r := c.reservations[key]; r != nil {
		r.reserved.Delete(uid)
		r.bound.Delete(uid)
		c.settleReservationLocked(r)
	}
	if !c.gangPods.has(key) {
		delete(c.gangRefusals, key)
		delete(c.gangsNever, key)
	}
}

// settleReservationLocked ends a reservation whose gang is wholly bound, or
// that no member holds any more.
func (c *quotaCache) settleReservationLocked(r *reservation) {
	switch {
	case r.bound.Len() >= int(r.minCount):
		c.endReservationLocked(r.key, true)
	case r.reserved.Len()+r.bound.Len() == 0:
		c.endReservationLocked(r.key, false)
	}
}

// endReservationLocked releases a reservation. The reclaim holds it took
// over end with it once the gang is placed; otherwise they are charged
// again, as they were before the gang was reserved: the reclaims are still
// owed to the gang.
func (c *quotaCache) endReservationLocked(key gang.Key, placed bool) {
	r, ok := c.reservations[key]
	if !ok {
		return
	}
	delete(c.reservations, key)
	if c.tree == nil {
		return
	}
	c.releaseLocked(reservationUID(key))
	for _, preemptor := range r.heldFor {
		h := c.holds[preemptor]
		if h == nil || !h.inReservation {
			continue // ended meanwhile
		}
		h.inReservation = false
		if placed {
			c.endHoldLocked(preemptor)
			continue
		}
		h.charged = true
		c.tree.AddRequests(holdUID(preemptor), h.namespace, h.requests)
	}
}

// reserveMemberLocked charges a member of an admitted gang. The first member
// opens the reservation for the whole gang (whole, this member included);
// each member takes its own requests out of it.
func (c *quotaCache) reserveMemberLocked(pod *corev1.Pod, key gang.Key, minCount int32, whole corev1.ResourceList, s *stateData) {
	r := c.reservations[key]
	if r == nil {
		r = &reservation{key: key, minCount: minCount, namespace: pod.Namespace, remaining: whole,
			reserved: sets.New[types.UID](), bound: sets.New[types.UID]()}
		c.reservations[key] = r
		// whole was admitted with the gang's holds counted as room for
		// it: the reservation takes their place.
		c.takeOverHoldsLocked(r, false)
	} else {
		// A hold made since for one member is room for the gang too, and
		// the member reserved now may have been admitted on it: it joins
		// the reservation, so that its room is charged once.
		c.takeOverHoldsLocked(r, true)
	}
	delete(c.gangAsked, key)
	r.remaining = subtractFloored(r.remaining, s.request.Requests())
	r.reserved.Insert(pod.UID)
	c.tree.AddRequests(reservationUID(key), r.namespace, r.remaining)
	c.reserveLocked(pod, s)
}

// takeOverHoldsLocked moves the charged reclaim holds of r's gang into r:
// their charges are released and r keeps them, to put back if the gang is
// not placed. With grow, r also keeps their room for the gang's members.
func (c *quotaCache) takeOverHoldsLocked(r *reservation, grow bool) {
	for preemptor, h := range c.holds {
		if h.gang != r.key || !h.charged {
			continue
		}
		c.releaseLocked(holdUID(preemptor))
		h.charged, h.inReservation = false, true
		r.heldFor = append(r.heldFor, preemptor)
		if grow {
			r.remaining = addLists(r.remaining, h.requests)
		}
	}
}

// unreserveMemberLocked undoes reserveMemberLocked for a member whose binding
// failed or whose wait at Permit ended: its share goes back to the
// reservation while other members hold it, and the reservation ends with the
// last of them. It returns the other members still reserved, which the
// caller rejects: a gang that lost a member before it was whole waits whole
// again rather than holding quota for part of itself. tentative says the
// member was reserved by a pod group cycle that is being undone, not by a
// binding: the other members are not waiting anywhere, and nothing outside
// the cycle saw the quota held.
func (c *quotaCache) unreserveMemberLocked(pod *corev1.Pod, tentative bool) gangRelease {
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
		c.endReservationLocked(key, false)
		if tentative {
			return gangRelease{}
		}
		return gangRelease{activate: c.admittedRefusedGangPodsLocked()}
	}
	r.remaining = addLists(r.remaining, c.requestLocked(pod).Requests())
	c.tree.AddRequests(reservationUID(key), r.namespace, r.remaining)
	if r.bound.Len() > 0 || tentative {
		// Part of the gang already runs: the rest waits for this member.
		return gangRelease{}
	}
	return gangRelease{reject: r.reserved.UnsortedList()}
}

// gangRelease is what the plugin does after a member left a reservation:
// reject the gang's other members waiting at Permit, or, once the
// reservation ended, move the pods of the gangs quota refused that the freed
// quota admits back to the active queue. No cluster event says the quota came
// free.
type gangRelease struct {
	reject   []types.UID
	activate map[string]*corev1.Pod
}

// admittedRefusedGangPodsLocked are the pending pods of the gangs PreFilter
// last refused that their quota admits now, by namespace/name.
func (c *quotaCache) admittedRefusedGangPodsLocked() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for key := range c.gangRefusals {
		pods := c.gangPods.pods(key)
		admitted := false
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				if _, v, err := c.admitPendingLocked(p, c.requestLocked(p)); err == nil && v.Admitted() {
					admitted = true
				}
				break // the gang asks as any one of its pending pods
			}
		}
		if !admitted {
			continue
		}
		for _, p := range pods {
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
