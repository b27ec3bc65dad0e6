package capacityscheduling

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// Devices that pods get through Dynamic Resource Allocation are charged by
// quota/claims' rule, the one the autoscaler reads too. A pod's own devices
// (claims from templates, and the class devices behind extended resources) are
// part of its charge, so admission, reclaim and preemption see them as any
// other resource. A claim the pod names directly may be shared: it is charged
// once, under claims.SharedKey, while any charged pod uses it, and no reclaim
// can free it by evicting one of its users.

// claimLookup reads claims and DeviceClasses from the scheduler's informers.
type claimLookup struct {
	claims  resourcelisters.ResourceClaimLister
	classes atomic.Pointer[claims.Classes]
	list    resourcelisters.DeviceClassLister
}

var _ claims.Lookup = &claimLookup{}

func (l *claimLookup) Claim(namespace, name string) *resourceapi.ResourceClaim {
	if l == nil || l.claims == nil {
		return nil
	}
	c, err := l.claims.ResourceClaims(namespace).Get(name)
	if err != nil {
		return nil
	}
	return c
}

func (l *claimLookup) Class(name string) *resourceapi.DeviceClass {
	if l == nil {
		return nil
	}
	if c := l.classes.Load(); c != nil {
		return c.Class(name)
	}
	return nil
}

func (l *claimLookup) ExtendedClass(name corev1.ResourceName) *resourceapi.DeviceClass {
	if l == nil {
		return nil
	}
	if c := l.classes.Load(); c != nil {
		return c.ExtendedClass(name)
	}
	return nil
}

// reindex rebuilds the class index from the lister: DeviceClasses are few
// and rarely change.
func (l *claimLookup) reindex() {
	list, err := l.list.List(labels.Everything())
	if err != nil {
		return
	}
	l.classes.Store(claims.NewClasses(list))
}

// registerClaimHandlers follows DeviceClasses into the lookup's index and
// re-charges the charged pods of a claim whose allocation arrives or changes.
// PreFilter decides nothing until these handlers, like the pod handlers, have
// seen every object once (podsReady).
func (p *Plugin) registerClaimHandlers(h fwk.Handle) error {
	factory := h.SharedInformerFactory()
	if factory == nil {
		return nil
	}
	claimInformer := factory.Resource().V1().ResourceClaims()
	classInformer := factory.Resource().V1().DeviceClasses()
	lookup := &claimLookup{claims: claimInformer.Lister(), list: classInformer.Lister()}
	lookup.classes.Store(claims.NewClasses(nil))
	p.cache.lookup = lookup
	reindex := func(any) {
		lookup.reindex()
		p.cache.rechargeAll()
	}
	classReg, err := classInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: reindex, UpdateFunc: func(_, obj any) { reindex(obj) }, DeleteFunc: reindex,
	})
	if err != nil {
		return fmt.Errorf("%s: DeviceClass handler: %w", Name, err)
	}
	onClaim := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if c, ok := obj.(*resourceapi.ResourceClaim); ok {
			p.cache.claimChanged(c.Namespace + "/" + c.Name)
		}
	}
	claimReg, err := claimInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { onClaim(obj) }, UpdateFunc: func(_, obj any) { onClaim(obj) }, DeleteFunc: onClaim,
	})
	if err != nil {
		return fmt.Errorf("%s: ResourceClaim handler: %w", Name, err)
	}
	podsReady := p.podsReady
	p.podsReady = func() bool { return podsReady() && classReg.HasSynced() && claimReg.HasSynced() }
	return nil
}

// claimBook is what the cache remembers of charged pods' claims.
type claimBook struct {
	// users are the charged pods of each claim (namespace/name), to re-charge
	// them when the claim changes.
	users map[string]map[types.UID]*corev1.Pod
	// sharers are the charged pods using each shared claim, by its key; the
	// claim stays charged while any does.
	sharers map[types.UID]sets.Set[types.UID]
	// of are, per charged pod, the claims and shared keys it holds.
	of map[types.UID]podClaims
}

type podClaims struct {
	claims []string
	shared []types.UID
}

func newClaimBook() claimBook {
	return claimBook{users: map[string]map[types.UID]*corev1.Pod{}, sharers: map[types.UID]sets.Set[types.UID]{}, of: map[types.UID]podClaims{}}
}

// chargeLocked is the pod's charge under the rule, reusing the requests the
// cache computed for this pod object, if any.
func (c *quotaCache) chargeLocked(pod *corev1.Pod) (claims.Charge, error) {
	if r, ok := c.requests[pod.UID]; ok && r.pod == pod {
		return c.chargeFromLocked(pod, r.requests)
	}
	return c.chargeFromLocked(pod, resources.PodRequests(pod))
}

func (c *quotaCache) chargeFromLocked(pod *corev1.Pod, requests corev1.ResourceList) (claims.Charge, error) {
	if c.lookup == nil {
		return claims.Charge{Own: requests}, nil
	}
	return claims.PodChargeFrom(pod, requests, c.lookup)
}

// reserveChargeLocked charges a pod being bound with what its PreFilter
// computed (s.seen): its own charge under its UID, its shared claims under
// theirs. kube-scheduler hands Reserve a copy of the pod PreFilter saw, so
// the charge travels in the cycle state rather than being looked up by the
// pod object. A pod PreFilter computed no charge for is charged its request.
func (c *quotaCache) reserveChargeLocked(pod *corev1.Pod, s *stateData) {
	seen := s.seen
	if seen.pod == nil || seen.plain {
		c.tree.AddRequests(pod.UID, pod.Namespace, s.request.Requests())
		// The binding of a pod charged its plain requests changes nothing
		// it is charged, while its requests are those PreFilter saw.
		if r, ok := c.requests[pod.UID]; ok && seen.pod != nil && r.pod == seen.pod && len(pod.Spec.ResourceClaims) == 0 {
			r.reserved = true
			c.requests[pod.UID] = r
		}
		return
	}
	c.tree.AddRequests(pod.UID, pod.Namespace, seen.charge.Own)
	c.holdClaimsLocked(c.tree, pod, seen.charge)
}

// claimProblemLocked is why the last look at pod's devices could not read
// them all, nil when it could.
func (c *quotaCache) claimProblemLocked(pod *corev1.Pod) error {
	if r, ok := c.requests[pod.UID]; ok && r.pod == pod {
		return r.err
	}
	return nil
}

// chargePodLocked charges a charged pod (elastic.Charged) and its claims to
// t: it replaces Tree.AddPod for the pods of the scheduler. It reports whether
// the pod is counted.
func (c *quotaCache) chargePodLocked(t *elastic.Tree, pod *corev1.Pod) bool {
	ch, err := c.chargeLocked(pod)
	if err != nil {
		klog.V(2).InfoS("Charging what can be read of a pod's devices", "pod", klog.KObj(pod), "err", err)
	}
	counted := t.AddRequests(pod.UID, pod.Namespace, ch.Own)
	if elastic.Leaving(pod) {
		t.MarkLeaving(pod.UID)
	}
	c.holdClaimsLocked(t, pod, ch)
	return counted
}

// holdClaimsLocked records pod as a user of its claims and charges the shared
// ones it is the first to use; the shared claims it no longer names are let go.
func (c *quotaCache) holdClaimsLocked(t *elastic.Tree, pod *corev1.Pod, ch claims.Charge) {
	before := c.claims.of[pod.UID]
	if len(pod.Spec.ResourceClaims) == 0 && len(before.claims) == 0 {
		return
	}
	c.dropClaimsLocked(t, pod.UID, ch.Shared)
	now := podClaims{}
	for i := range pod.Spec.ResourceClaims {
		name := pod.Spec.ResourceClaims[i].Name
		if n := pod.Spec.ResourceClaims[i].ResourceClaimName; n != nil {
			name = *n
		} else if generated := generatedName(pod, name); generated != "" {
			name = generated
		} else {
			continue
		}
		key := pod.Namespace + "/" + name
		if c.claims.users[key] == nil {
			c.claims.users[key] = map[types.UID]*corev1.Pod{}
		}
		c.claims.users[key][pod.UID] = pod
		now.claims = append(now.claims, key)
	}
	for _, s := range ch.Shared {
		t.AddRequests(s.Key, pod.Namespace, s.Requests)
		if c.claims.sharers[s.Key] == nil {
			c.claims.sharers[s.Key] = sets.New[types.UID]()
		}
		c.claims.sharers[s.Key].Insert(pod.UID)
		now.shared = append(now.shared, s.Key)
	}
	c.claims.of[pod.UID] = now
}

func generatedName(pod *corev1.Pod, podClaim string) string {
	for i := range pod.Status.ResourceClaimStatuses {
		if s := &pod.Status.ResourceClaimStatuses[i]; s.Name == podClaim && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// dropClaimsLocked forgets uid as a user of its claims, releasing each shared
// claim nobody uses any more, except those in keep (about to be charged again).
func (c *quotaCache) dropClaimsLocked(t *elastic.Tree, uid types.UID, keep []claims.Shared) {
	held, ok := c.claims.of[uid]
	if !ok {
		return
	}
	delete(c.claims.of, uid)
	for _, key := range held.claims {
		delete(c.claims.users[key], uid)
		if len(c.claims.users[key]) == 0 {
			delete(c.claims.users, key)
		}
	}
	for _, key := range held.shared {
		sharers := c.claims.sharers[key]
		sharers.Delete(uid)
		if sharers.Len() > 0 || kept(keep, key) {
			continue
		}
		delete(c.claims.sharers, key)
		if t != nil && t.RemovePod(key) {
			c.changedAt = c.clock.Now()
		}
	}
}

func kept(keep []claims.Shared, key types.UID) bool {
	for _, s := range keep {
		if s.Key == key {
			return true
		}
	}
	return false
}

// claimChanged re-charges the charged pods of a claim: its allocation, once
// there, is what they are charged.
func (c *quotaCache) claimChanged(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The gangs' requests count their members' devices, pending ones too.
	clear(c.gangAsked)
	if c.tree == nil {
		return
	}
	// Copied first: charging a pod records it as the claim's user again.
	users := make([]*corev1.Pod, 0, len(c.claims.users[key]))
	for _, pod := range c.claims.users[key] {
		users = append(users, pod)
	}
	for _, pod := range users {
		c.chargePodLocked(c.tree, pod)
		c.changedAt = c.clock.Now()
	}
}

// rechargeAll re-charges every charged pod: a DeviceClass changed what the
// extended resource names and the claims of its class charge. Classes change
// rarely; this walks the pods once.
func (c *quotaCache) rechargeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rechargeAllLocked()
}

// rechargeAllLocked is rechargeAll for callers holding the lock; the plugin
// also calls it once all its informers have synced, as the pods may have
// been charged before their claims and classes were seen.
func (c *quotaCache) rechargeAllLocked() {
	clear(c.gangAsked)
	if c.tree == nil || c.podLister == nil || c.lookup == nil {
		return
	}
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		klog.V(2).InfoS("Listing pods to re-charge their devices", "err", err)
		return
	}
	for _, pod := range pods {
		if elastic.Charged(pod) && c.tree.Tracks(pod.UID) {
			c.chargePodLocked(c.tree, pod)
			c.changedAt = c.clock.Now()
		}
	}
}

// sharedChargedLocked says whether a shared claim is charged to the tree in
// force already.
func (c *quotaCache) sharedChargedLocked(key types.UID) bool {
	return c.tree != nil && c.tree.Tracks(key)
}

// freedBy is what releasing a charged pod may free: its own charge and every
// shared claim it uses, for the queueing hint.
func (c *quotaCache) freedBy(pod *corev1.Pod) corev1.ResourceList {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, _ := c.chargeLocked(pod)
	// A copy: the hint subtracts from it, and Own may be the cache's.
	return ch.Request(func(types.UID) bool { return false }).DeepCopy()
}
