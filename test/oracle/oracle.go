package oracle

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// Oracle holds the objects it was fed and the violations it saw.
type Oracle struct {
	mu sync.Mutex

	nodes  map[string]*corev1.Node
	quotas map[string]*capacityQuota
	// marked are the nodes ever seen with the autoscaler's deletion taint.
	marked map[string]bool
	// unmarkedEvictions are evictions from nodes not seen marked (yet), by
	// node. The autoscaler taints a node before it evicts a pod there, but
	// nodes and pods reach the oracle through separate informers: a drain's
	// eviction may come first. One whose node is marked later is a drain;
	// the rest are violations when the verdict is read.
	unmarkedEvictions map[string][]string
	// unseenEnds are unmarked evictions from nodes deleted while the watch
	// was down: the oracle never saw their last state, so it cannot tell
	// whether they were marked first.
	unseenEnds []string

	pods map[types.UID]*podState
	// seenPods is every pod ever seen, to judge a preemptor named by UID only
	// and a scale-up reported for a pod that may be gone.
	seenPods map[types.UID]seenPod
	// treeHistory are the trees in force, in order, and scaleUps the
	// scale-ups reported, judged at the verdict (scaleup.go).
	treeHistory []*quotaTree
	scaleUps    []scaleUpReport
	// gangRequests are the requests of every pod ever seen in each gang, by
	// UID; ackSizes the smallest min-available seen of each ACK gang.
	gangRequests map[gangRef]map[types.UID]corev1.ResourceList
	ackSizes     map[gangRef]int

	// dra are the ResourceClaims and DeviceClasses (treedevices.go); nil
	// until the first is fed.
	dra *draObjects

	trees map[string]*treeObject // kube-system trees by name
	// inForce is the tree the oracle judges against; nil when none.
	inForce *quotaTree
	// pending is set while the tree in force has a generation not judged yet;
	// deferred are the pods admitted meanwhile, judged once it is.
	pending  bool
	deferred []types.UID

	// slices are the ResourceSlices by name, whose devices count against
	// device-class limits of CapacityQuotas.
	slices map[string]*resourcev1.ResourceSlice

	// podGroups are the gang sizes of the PodGroups with a gang policy, by
	// namespace/name; gangsWhole the gangs ever seen with all of their size
	// bound; released the requests of pods that stopped holding capacity
	// since the last status write of the tree in force, by namespace.
	podGroups  map[string]int32
	gangsWhole map[gangRef]bool
	// leavers and joiners are, by gang, the pods relabelled out of it or
	// into it while they waited.
	leavers, joiners map[gangRef]map[types.UID]bool
	released         map[string]corev1.ResourceList
	// leftSince are the gangs a pod left (deleted or relabelled) since the
	// last status write of the tree in force; movedSince the pods relabelled
	// out of a gang since then.
	leftSince  map[gangRef]bool
	movedSince map[types.UID]bool

	violations []string
	seen       map[string]bool // violations already recorded, for moments that repeat
	belowMin   []belowMinEviction
	counts     Counts
}

// Counts are what the run exercised.
type Counts struct {
	// Reclaims are pods preempted by the scheduler, reclaim or priority
	// preemption, that stopped running.
	Reclaims int
	// Drained are pods evicted from nodes the autoscaler marked for deletion.
	Drained int
	// GangsWhole are the gangs seen with all of their size bound at once.
	GangsWhole int
	// ScaleUpsJudged are the scale-ups reported for pods of a tree's
	// namespaces that were judged against the tree.
	ScaleUpsJudged int
}

// New returns an oracle that has seen nothing.
func New() *Oracle {
	return &Oracle{
		nodes:             map[string]*corev1.Node{},
		quotas:            map[string]*capacityQuota{},
		marked:            map[string]bool{},
		unmarkedEvictions: map[string][]string{},
		pods:              map[types.UID]*podState{},
		seenPods:          map[types.UID]seenPod{},
		gangRequests:      map[gangRef]map[types.UID]corev1.ResourceList{},
		ackSizes:          map[gangRef]int{},
		trees:             map[string]*treeObject{},
		seen:              map[string]bool{},
		slices:            map[string]*resourcev1.ResourceSlice{},
		podGroups:         map[string]int32{},
		gangsWhole:        map[gangRef]bool{},
		leavers:           map[gangRef]map[types.UID]bool{},
		joiners:           map[gangRef]map[types.UID]bool{},
		released:          map[string]corev1.ResourceList{},
		leftSince:         map[gangRef]bool{},
		movedSince:        map[types.UID]bool{},
	}
}

// SetNode records a node added or updated.
func (o *Oracle) SetNode(node *corev1.Node) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nodes[node.Name] = node
	for _, taint := range node.Spec.Taints {
		if taint.Key == toBeDeletedTaint {
			o.marked[node.Name] = true
			o.counts.Drained += len(o.unmarkedEvictions[node.Name])
			delete(o.unmarkedEvictions, node.Name)
		}
	}
	o.checkQuotasLocked("node " + node.Name + " registered or changed")
}

// DeleteNode records a node gone.
func (o *Oracle) DeleteNode(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deleteNodeLocked(name)
}

func (o *Oracle) deleteNodeLocked(name string) {
	delete(o.nodes, name)
	o.checkQuotasLocked("node " + name + " deleted")
}

// DeleteNodeUnseen records a node gone whose deletion the watch missed (an
// informer's DeletedFinalStateUnknown, after an outage). The evictions from
// it still waiting for its mark cannot be judged: the mark may have come and
// gone in the gap.
func (o *Oracle) DeleteNodeUnseen(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.unmarkedEvictions[name] {
		o.unseenEnds = append(o.unseenEnds, e+" (unknown: the node was deleted while the watch was down)")
	}
	delete(o.unmarkedEvictions, name)
	o.deleteNodeLocked(name)
}

// SetCapacityQuota records a CapacityQuota created or updated.
func (o *Oracle) SetCapacityQuota(q *autoscalingv1beta1.CapacityQuota) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next := parseCapacityQuota(q)
	if last, ok := o.quotas[q.Name]; ok && last.changed.Equal(&next.changed) && last.uid == next.uid {
		next.over = last.over // a status write: the same quota, still judged as before
	}
	o.quotas[q.Name] = next
	o.checkQuotasLocked("CapacityQuota " + q.Name + " written")
}

// DeleteCapacityQuota records a CapacityQuota gone.
func (o *Oracle) DeleteCapacityQuota(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.quotas, name)
}

// SetTree records an ElasticQuotaTree created or updated, status included.
// Trees outside kube-system are never in force and are ignored.
func (o *Oracle) SetTree(t *schedulingv1beta1.ElasticQuotaTree) {
	if t.Namespace != schedulingv1beta1.EnforcedNamespace {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	obj := o.trees[t.Name]
	if obj == nil || obj.object.UID != t.UID {
		obj = &treeObject{}
		o.trees[t.Name] = obj
	}
	obj.object = t
	if judged, valid := verdict(t); judged && valid {
		obj.lastValid = parseTree(t)
	}
	o.chooseTreeLocked()
	if judged, _ := verdict(t); judged && o.inForce != nil && o.inForce == obj.lastValid && !o.pending && len(t.Status.Quotas) > 0 {
		o.judgeHeldLocked(o.inForce, t.Status.Quotas)
	}
}

// DeleteTree records an ElasticQuotaTree gone.
func (o *Oracle) DeleteTree(namespace, name string) {
	if namespace != schedulingv1beta1.EnforcedNamespace {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.trees, name)
	o.chooseTreeLocked()
}

// SetPod records a pod added or updated. initial marks pods listed when the
// feed started: they are the starting state, not moments to judge.
func (o *Oracle) SetPod(pod *corev1.Pod, initial bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seePodLocked(pod)
	st := o.pods[pod.UID]
	if st == nil {
		st = &podState{}
		o.pods[pod.UID] = st
	}
	if !initial {
		o.classifyDisruptionLocked(st, pod)
	}
	if st.pod != nil && !st.counted {
		o.noteMovedLocked(st.pod, pod)
	}
	if pod.DeletionTimestamp != nil && (st.pod == nil || st.pod.DeletionTimestamp == nil) {
		o.noteLeftLocked(pod)
	}
	wasCounted, before := st.counted, st.requests
	st.pod, st.counted, st.requests = pod, occupies(pod), podRequests(pod)
	switch {
	case initial:
	case st.counted && !wasCounted:
		o.judgeAdmissionLocked(st, o.admittedLocked(st), "bound")
	case st.counted:
		if grown := grownResources(before, st.requests); len(grown) > 0 {
			o.judgeAdmissionLocked(st, grown, "resized")
		}
	case wasCounted:
		o.releasedLocked(st)
		o.stoppedLocked(st)
	}
	if !initial && st.counted {
		o.noteGangLocked(pod)
	}
	if !initial && st.counted && st.disruption == corev1.PodReasonPreemptionByScheduler && pod.DeletionTimestamp != nil {
		o.judgeEvictionLocked(st)
	}
}

// DeletePod records a pod gone, in its final known state.
func (o *Oracle) DeletePod(pod *corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.pods[pod.UID]
	if st == nil {
		return
	}
	o.classifyDisruptionLocked(st, pod)
	delete(o.pods, pod.UID)
	o.noteLeftLocked(pod)
	if st.counted {
		st.counted = false
		o.releasedLocked(st)
		o.stoppedLocked(st)
	}
}

// PreemptorOf names the pod the scheduler preempted victim for, e.g. from the
// victim's Preempted event.
type PreemptorOf func(victim *corev1.Pod) (types.UID, error)

// Violations are every broken promise, in the order they happened; see
// Verdict.
func (o *Oracle) Violations(preemptorOf PreemptorOf) []string {
	violations, _ := o.Verdict(preemptorOf)
	return violations
}

// Verdict is every broken promise, in the order they happened, and the
// evictions that could not be judged (see DeleteNodeUnseen). Reclaim
// evictions that left a leaf below its min are judged last, once preemptorOf
// can name their preemptor: they broke the promise unless it is of the
// victim's leaf. When preemptorOf cannot name it, an eviction broke the
// promise if no pod of the leaf with a higher priority was pending when the
// victim was marked, and is unjudged otherwise.
func (o *Oracle) Verdict(preemptorOf PreemptorOf) (violations, unjudged []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	violations = append([]string(nil), o.violations...)
	violations = append(violations, o.partlyBoundLocked()...)
	violations = append(violations, o.refusedScaleUpsLocked()...)
	unjudged = append(unjudged, o.unseenEnds...)
	for _, node := range slices.Sorted(maps.Keys(o.unmarkedEvictions)) {
		violations = append(violations, o.unmarkedEvictions[node]...)
	}
	for _, e := range o.belowMin {
		uid, err := preemptorOf(e.victim)
		switch {
		case err != nil && e.leafRival:
			unjudged = append(unjudged, fmt.Sprintf("%s (preemptor unknown: %v)", e.message, err))
			continue
		case err != nil:
			violations = append(violations, fmt.Sprintf("%s, and no pod of its leaf with a higher priority was pending (preemptor unknown: %v)", e.message, err))
			continue
		}
		preemptor, seen := o.seenPods[uid]
		if !seen {
			violations = append(violations, fmt.Sprintf("%s, for pod %s the oracle never saw", e.message, uid))
			continue
		}
		leaf, governed := e.tree.leafOf[preemptor.namespace]
		switch {
		case !governed && preemptor.priority > priority(e.victim):
			// A pod no tree governs preempts as kube-scheduler's
			// DefaultPreemption does: by priority alone, whatever the victim's
			// quota.
		case !governed:
			violations = append(violations, fmt.Sprintf("%s, for pod %s of namespace %s, which no tree governs, at priority %d, not above the victim's %d",
				e.message, uid, preemptor.namespace, preemptor.priority, priority(e.victim)))
		case leaf != e.leaf:
			violations = append(violations, fmt.Sprintf("%s, for pod %s of namespace %s", e.message, uid, preemptor.namespace))
		}
	}
	return violations, unjudged
}

// Counts reports what the run exercised so far.
func (o *Oracle) Counts() Counts {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.counts
	c.GangsWhole = len(o.gangsWhole)
	return c
}

// violateLocked records a violation once.
func (o *Oracle) violateLocked(msg string) {
	if o.seen[msg] {
		return
	}
	o.seen[msg] = true
	o.violations = append(o.violations, msg)
}
