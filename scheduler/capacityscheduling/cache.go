package capacityscheduling

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
	"github.com/quotascale/quotascale/quota/resources"
)

// quotaCache is the plugin's view of the quota tree in force and of the pods
// charged to it. Informer handlers, queueing hints and the scheduling cycle share
// it under one exclusive lock: even admission uses the tree's scratch buffer, and
// every critical section is a few hundred nanoseconds.
type quotaCache struct {
	mu sync.Mutex

	// tree is the tree in force, nil when there is none. It tracks the pods
	// charged to it, so a swap re-charges them without a list.
	tree *elastic.Tree
	// lifecycle records what was decided about every ElasticQuotaTree object.
	lifecycle treeLifecycle

	// flavors maps ResourceFlavor names to their node labels.
	flavors map[string]map[string]string
	// holds are reclaims this scheduler made, by preemptor. The quota a reclaim
	// frees is charged to the tree under the hold's own UID as soon as the
	// victims are chosen, so no other pod takes it before the preemptor is
	// placed. While the preemptor is reserved its own charge stands in for the
	// hold's; the hold ends when the preemptor is bound or deleted, or when the
	// sweep finds it older than holdFor. A failed binding (Unreserve) puts the
	// hold's charge back: the reclaim is still owed to the preemptor.
	holds   map[types.UID]*hold
	holdFor time.Duration
	// changedAt is when usage or the tree last changed, for the status
	// writer to tell a burst of charges from a settled tree.
	changedAt time.Time

	podLister corelisters.PodLister
	clock     clock.PassiveClock
	// metrics is nil in the autoscaler's simulation.
	metrics *pluginMetrics
	// refused are the quota nodes and resources that refused each pod's last
	// scheduling attempt, while metrics are exported; admitted are the
	// admissions counters by leaf.
	refused  map[types.UID][]quotaResource
	admitted map[string]metrics.CounterMetric
	// requests are pods' effective requests, with the pod object they were
	// computed from. The scheduler retries a pending pod with the same object
	// until the pod changes, so resources.PodRequests, most of what PreFilter
	// would cost, runs once per version of a pod rather than once per attempt,
	// and usually on the informer's goroutine (notePending) rather than in the
	// scheduling cycle.
	requests map[types.UID]podRequests

	// lookup reads claims and DeviceClasses; nil without informers (the
	// pods' devices are then not charged). claims remembers the charged
	// pods' claims (claims.go).
	lookup claims.Lookup
	claims claimBook

	// reservations are the admitted gangs still filling up; gangPods the
	// live pods of every gang (gangcache.go).
	reservations map[gang.Key]*reservation
	gangPods     gangIndex
	// gangRefusals is the last refusal of each gang PreFilter refused, for
	// PodGroupPostFilter; gangsNever the gangs reported as never fitting,
	// with the report; gangWarned the pods warned about an unreadable gang.
	gangRefusals map[gang.Key]string
	gangsNever   map[gang.Key]string
	gangWarned   map[types.UID]string
	// gangAsked caches each gang's outstanding request (gangRequestLocked).
	gangAsked map[gang.Key]gangAsked
	// trial is set while PodGroupPostFilter places a gang as if a reclaim's
	// victims were gone (podgroupreclaim.go).
	trial *reclaimTrial
	// podGroup looks Workload API PodGroups up; nil where the API is off.
	podGroup func(namespace, name string) (*schedulingapi.PodGroup, bool)
}

// podRequests is what the cache computed for one pod object: its requests
// (resources.PodRequests), its charge under quota/claims' rule and what
// admitting it adds, converted for a tree. plain says the charge is the
// requests alone (no devices), so request stays valid while the tree does.
type podRequests struct {
	pod      *corev1.Pod
	requests corev1.ResourceList
	request  elastic.Request
	charge   claims.Charge
	plain    bool
	// reserved says Reserve charged the pod with these plain requests: the
	// update that reports it bound changes nothing it is charged.
	reserved bool
	// err is why part of the pod's devices could not be read.
	err error
}

type hold struct {
	leaf      string
	namespace string
	requests  corev1.ResourceList
	// victims still exist; while any does, the reclaim is in flight.
	victims sets.Set[types.UID]
	started time.Time
	// charged says the hold's quota is charged under holdUID; false while the
	// preemptor is reserved and charged itself, or while its gang's
	// reservation holds the room (inReservation).
	charged       bool
	inReservation bool
	// gang is the preemptor's gang, whose members may all use the room; the
	// zero Key for a pod of no gang.
	gang gang.Key
}

// holdUIDPrefix starts the UID a hold is charged under.
const holdUIDPrefix = "reclaim-hold/"

// holdUID is the UID a hold is charged under, distinct from any pod's.
func holdUID(preemptor types.UID) types.UID { return holdUIDPrefix + preemptor }

// heldLocked says whether the tree's charge under uid is one that no bound
// pod shows, and that lasts: a reclaim's hold, a gang's reservation, or a
// member of an admitted gang reserved and waiting for the rest of it. A pod
// of no gang being bound is not: it shows as bound a moment later, and a
// reader who counted it both as held and as bound would count it twice.
func (c *quotaCache) heldLocked(uid types.UID) bool {
	if s := string(uid); strings.HasPrefix(s, holdUIDPrefix) || strings.HasPrefix(s, reservationUIDPrefix) {
		return true
	}
	if key, ok := c.gangPods.keyOfPod(uid); ok {
		if r := c.reservations[key]; r != nil {
			return r.reserved.Has(uid)
		}
	}
	return false
}

// newQuotaCache is an empty cache whose holds last holdFor, so that quota is
// not held back forever for a preemptor that never gets placed.
func newQuotaCache(podLister corelisters.PodLister, clk clock.PassiveClock, holdFor time.Duration) *quotaCache {
	return &quotaCache{
		flavors:   map[string]map[string]string{},
		holds:     map[types.UID]*hold{},
		holdFor:   holdFor,
		requests:  map[types.UID]podRequests{},
		podLister: podLister,
		clock:     clk,
		claims:    newClaimBook(),

		reservations: map[gang.Key]*reservation{},
		gangPods:     newGangIndex(),
		gangRefusals: map[gang.Key]string{},
		gangsNever:   map[gang.Key]string{},
		gangWarned:   map[types.UID]string{},
		gangAsked:    map[gang.Key]gangAsked{},
	}
}

// requestLocked is what admitting pod adds to the tree in force: its charge
// under quota/claims' rule (its requests, its own devices, and the shared
// claims not charged yet), converted for the tree. The requests are computed
// once per pod object; a pod without devices is converted once per tree.
// Callers hold the lock, with a tree in force, and do not modify the result.
func (c *quotaCache) requestLocked(pod *corev1.Pod) elastic.Request {
	r, ok := c.requests[pod.UID]
	if !ok || r.pod != pod {
		r = podRequests{pod: pod, requests: resources.PodRequests(pod)}
	}
	r.charge, r.err = c.chargeFromLocked(pod, r.requests)
	switch {
	case r.charge.Plain(r.requests):
		if !r.plain || !r.request.For(c.tree) {
			r.request = c.tree.Request(r.requests)
		}
		r.plain = true
	default:
		r.plain = false
		r.request = c.tree.Request(r.charge.Request(c.sharedChargedLocked))
	}
	c.requests[pod.UID] = r
	return r.request
}

// notePending computes the requests of a pending pod the informer delivers, for
// a namespace the tree in force governs, so that its first scheduling attempt
// finds them. The scheduler's queue receives the same object from the same
// informer; when it gets there first, requestLocked computes them instead.
// The computation runs outside the lock, which the scheduling cycle shares.
//
// An update that leaves the requests as they were (a failed attempt's
// PodScheduled condition, a label) keeps those of the version before, old.
func (c *quotaCache) notePending(old, pod *corev1.Pod) {
	c.mu.Lock()
	governed := false
	if c.tree != nil {
		_, governed = c.tree.LeafFor(pod.Namespace)
	}
	known := c.adoptRequestsLocked(old, pod)
	c.mu.Unlock()
	if !governed || known {
		return
	}
	requests := resources.PodRequests(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil || c.requests[pod.UID].pod == pod {
		return
	}
	c.requests[pod.UID] = podRequests{pod: pod, requests: requests, request: c.tree.Request(requests), plain: true}
}

// exportMetrics registers the metrics and points them at this cache.
func (c *quotaCache) exportMetrics() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused = map[types.UID][]quotaResource{}
	c.admitted = map[string]metrics.CounterMetric{}
	c.metrics = newPluginMetrics(c)
}

// updatePod follows a pod through its life: charged once it is assigned,
// released when it finishes (elastic.Charged). old is the version the informer
// delivered before pod, nil for an add: what pod is charged is computed again
// only when it may differ from what old was charged.
func (c *quotaCache) updatePod(old, pod *corev1.Pod) {
	if pod.Spec.NodeName == "" {
		if _, inGang := gang.RefOf(pod); inGang {
			c.mu.Lock()
			c.followGangLocked(pod)
			c.mu.Unlock()
		}
		c.notePending(old, pod)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.followGangLocked(pod)
	// Bound: the scheduler is done with it, whether or not a tree is in force.
	// The requests computed for its pending version charge it, then go.
	delete(c.refused, pod.UID)
	adopted := c.adoptRequestsLocked(old, pod)
	defer delete(c.requests, pod.UID)
	if c.tree == nil {
		return
	}
	if !elastic.Charged(pod) {
		// Finished: no longer holds capacity.
		c.releaseLocked(pod.UID)
		return
	}
	if c.holds[pod.UID] != nil {
		// The preemptor is bound: the reclaim is complete.
		c.reclaimLocked(c.holds[pod.UID].leaf, reclaimPlaced)
		c.endHoldLocked(pod.UID)
	}
	if old != nil && sameCharge(old, pod) && c.tree.Tracks(pod.UID) {
		return
	}
	if adopted && c.requests[pod.UID].reserved && c.tree.Tracks(pod.UID) &&
		len(pod.Spec.ResourceClaims) == 0 && !elastic.Leaving(pod) {
		// The binding of a pod Reserve charged, with requests as they were.
		return
	}
	if c.chargePodLocked(c.tree, pod) {
		c.changedAt = c.clock.Now()
	}
}

// adoptRequestsLocked makes the requests computed for old serve pod, a later
// version of the same pod, when everything they were computed from is
// unchanged. It reports whether pod's requests are known.
func (c *quotaCache) adoptRequestsLocked(old, pod *corev1.Pod) bool {
	r, ok := c.requests[pod.UID]
	switch {
	case !ok:
		return false
	case r.pod == pod:
		return true
	case old == nil || r.pod != old || !resources.SameRequests(old, pod):
		return false
	}
	r.pod = pod
	c.requests[pod.UID] = r
	return true
}

// sameCharge says that an update of a charged pod leaves its charge as it
// was: the pod stays on its node, charged, and leaving or not as before; it
// has no claims, whose status could have moved; and its requests are the
// same. The kubelet's status updates of running pods are of this kind.
func sameCharge(old, pod *corev1.Pod) bool {
	return elastic.Charged(old) && old.Spec.NodeName == pod.Spec.NodeName &&
		elastic.Leaving(old) == elastic.Leaving(pod) &&
		len(old.Spec.ResourceClaims) == 0 && len(pod.Spec.ResourceClaims) == 0 &&
		resources.SameRequests(old, pod)
}

func (c *quotaCache) deletePod(pod *corev1.Pod) {
	uid := pod.UID
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetGangPodLocked(pod)
	delete(c.gangWarned, uid)
	delete(c.requests, uid)
	if c.tree == nil {
		return
	}
	c.endHoldLocked(uid)
	delete(c.refused, uid)
	for _, h := range c.holds {
		h.victims.Delete(uid)
	}
	c.releaseLocked(uid)
}

func (c *quotaCache) releaseLocked(uid types.UID) {
	if c.tree.RemovePod(uid) {
		c.changedAt = c.clock.Now()
	}
	c.dropClaimsLocked(c.tree, uid, nil)
}

// startHold charges what a reclaim frees to the preemptor's hold.
func (c *quotaCache) startHold(preemptor *corev1.Pod, leaf string, requests corev1.ResourceList, victims []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return
	}
	c.endHoldLocked(preemptor.UID)
	h := &hold{leaf: leaf, namespace: preemptor.Namespace, requests: requests, victims: sets.New[types.UID](), started: c.clock.Now(), charged: true}
	h.gang, _ = gang.RefOf(preemptor)
	for _, v := range victims {
		h.victims.Insert(v.UID)
	}
	c.holds[preemptor.UID] = h
	c.tree.AddRequests(holdUID(preemptor.UID), h.namespace, h.requests)
	c.changedAt = c.clock.Now()
}

func (c *quotaCache) endHoldLocked(preemptor types.UID) {
	h, ok := c.holds[preemptor]
	if !ok {
		return
	}
	delete(c.holds, preemptor)
	if h.charged {
		c.releaseLocked(holdUID(preemptor))
	}
}

// reserveLocked charges a pod that is being bound with what its PreFilter
// computed (s). A preemptor's own charge replaces its hold's until binding
// succeeds or fails.
func (c *quotaCache) reserveLocked(pod *corev1.Pod, s *stateData) {
	if h := c.holds[pod.UID]; h != nil && h.charged {
		c.releaseLocked(holdUID(pod.UID))
		h.charged = false
	}
	c.reserveChargeLocked(pod, s)
	c.changedAt = c.clock.Now()
}

// unreserve releases what Reserve charged when binding fails, or when a pod
// group cycle is undone (tentative), and puts a preemptor's hold back: its
// reclaim still stands. For a member of a gang it returns the members to
// reject and the pods to activate (unreserveMemberLocked).
func (c *quotaCache) unreserve(pod *corev1.Pod, tentative bool) gangRelease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return gangRelease{}
	}
	if c.trial.unreserve(pod.UID) {
		return gangRelease{}
	}
	c.releaseLocked(pod.UID)
	if h := c.holds[pod.UID]; h != nil && !h.charged && !h.inReservation {
		c.tree.AddRequests(holdUID(pod.UID), h.namespace, h.requests)
		h.charged = true
	}
	return c.unreserveMemberLocked(pod, tentative)
}

// sweepHolds ends the holds older than holdFor: their preemptors were never
// placed, and the quota they hold back goes to whoever is admitted next. It
// returns the pending pods only those holds kept out, for the caller to put
// back in the scheduling queue: no cluster event says that quota came free.
func (c *quotaCache) sweepHolds() ([]*corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return nil, nil
	}
	now := c.clock.Now()
	var expired []types.UID
	for preemptor, h := range c.holds {
		if now.Sub(h.started) > c.holdFor {
			expired = append(expired, preemptor)
		}
	}
	if len(expired) == 0 {
		return nil, nil
	}
	// The holds end whether or not the pods can be listed.
	refused, err := c.refusedPendingLocked()
	for _, preemptor := range expired {
		c.reclaimLocked(c.holds[preemptor].leaf, reclaimExpired)
		c.endHoldLocked(preemptor)
	}
	keptOut := refused[:0]
	for _, pod := range refused {
		if _, v, err := c.admitPendingLocked(pod, c.requestLocked(pod)); err == nil && v.Admitted() {
			keptOut = append(keptOut, pod)
		}
	}
	return keptOut, err
}

// refusedPendingLocked lists the pending pods the tree in force refuses now,
// each judged as PreFilter judges it: a member of a gang by what its gang
// still asks. A pod whose gang cannot ask yet is not refused by quota. It
// walks every pod the informer holds, so it is only for rare events such as
// a hold expiring. Callers hold the lock, with a tree in force.
func (c *quotaCache) refusedPendingLocked() ([]*corev1.Pod, error) {
	if c.podLister == nil {
		return nil, nil
	}
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing the pending pods: %w", err)
	}
	var out []*corev1.Pod
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		if _, governed := c.tree.LeafFor(pod.Namespace); !governed {
			continue
		}
		if _, v, err := c.admitPendingLocked(pod, c.requestLocked(pod)); err == nil && !v.Admitted() {
			out = append(out, pod)
		}
	}
	return out, nil
}

// reclaimsInFlight counts victims of this scheduler's reclaims that still
// exist.
func (c *quotaCache) reclaimsInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, h := range c.holds {
		n += h.victims.Len()
	}
	return n
}

// setTree puts a new tree in force. When it replaces nothing, usage is rebuilt
// from the assigned pods the informer holds.
func (c *quotaCache) setTreeLocked(logger klog.Logger, t *elastic.Tree) {
	if t != nil && c.tree == nil && c.podLister != nil {
		c.claims = newClaimBook()
		pods, err := c.podLister.List(labels.Everything())
		if err != nil {
			logger.Error(err, "Listing pods to rebuild quota usage")
		}
		for _, p := range pods {
			if elastic.Charged(p) {
				c.chargePodLocked(t, p)
			}
		}
	}
	if t == nil {
		c.claims = newClaimBook()
		c.holds = map[types.UID]*hold{}
		clear(c.refused)
		clear(c.reservations)
	}
	c.forgetNodesLocked(c.tree, t)
	clear(c.gangAsked)
	c.tree = t
	c.changedAt = c.clock.Now()
}

func (c *quotaCache) updateFlavor(f *kueuev1beta1.ResourceFlavor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	labels := make(map[string]string, len(f.Spec.NodeLabels))
	for k, v := range f.Spec.NodeLabels {
		labels[k] = v
	}
	c.flavors[f.Name] = labels
}

func (c *quotaCache) deleteFlavor(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flavors, name)
}

// markLeaving marks the victims a preemption is about to evict leaving, in
// the tree in force (elastic.Tree.MarkLeaving).
func (c *quotaCache) markLeaving(victims []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return
	}
	for _, v := range victims {
		c.tree.MarkLeaving(v.UID)
	}
}

// keepsGuarantees is elastic.Tree.KeepsGuarantees on the tree in force.
func (c *quotaCache) keepsGuarantees(namespace string, victims []types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tree == nil || c.tree.KeepsGuarantees(namespace, victims)
}

// chargedWithin is elastic.Tree.ChargedWithin on the tree in force.
func (c *quotaCache) chargedWithin(namespace string, victims []types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tree == nil || c.tree.ChargedWithin(namespace, victims)
}

// admitLocked checks requests against the tree. A preemptor's own hold is
// released first: it is the room the reclaim made for this very pod. Callers hold
// the lock.
func (c *quotaCache) admitLocked(pod *corev1.Pod, request elastic.Request) elastic.Verdict {
	h := c.holds[pod.UID]
	if h == nil || !h.charged {
		return c.tree.AdmitRequest(pod.Namespace, request)
	}
	scratch := c.tree.Scratch()
	scratch.Release(h.namespace, h.requests)
	return scratch.Admit(pod.Namespace, request.Requests())
}
