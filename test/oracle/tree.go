package oracle

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// quotaTree is one valid generation of an ElasticQuotaTree: its quota nodes
// in depth-first order and the leaf of every namespace.
type quotaTree struct {
	object string // namespace/name@generation, for messages
	nodes  []treeNode
	leafOf map[string]int
}

type treeNode struct {
	name     string
	parent   int // -1 for the root
	min, max corev1.ResourceList
}

// treeObject is what the oracle knows of one tree object: the latest write
// and the latest generation its status reported valid.
type treeObject struct {
	object    *schedulingv1beta1.ElasticQuotaTree
	lastValid *quotaTree
}

// podState is a pod as the oracle last saw it.
type podState struct {
	pod      *corev1.Pod
	counted  bool // bound and not finished: its requests are charged
	requests corev1.ResourceList
	// disruption is the DisruptionTarget reason first seen, "" until then.
	disruption string
	// leafRival is whether, when the scheduler marked the pod for preemption,
	// a pod of the same leaf with a higher priority was pending: the only
	// preemptor that may take a leaf below its min.
	leafRival bool
	// evictionJudged is set once a preempted pod's eviction was judged
	// against its leaf's min.
	evictionJudged bool
}

type belowMinEviction struct {
	victim    *corev1.Pod
	tree      *quotaTree
	leaf      int
	leafRival bool
	message   string
}

func parseTree(t *schedulingv1beta1.ElasticQuotaTree) *quotaTree {
	out := &quotaTree{object: fmt.Sprintf("%s/%s@%d", t.Namespace, t.Name, t.Generation), leafOf: map[string]int{}}
	var walk func(spec *schedulingv1beta1.ElasticQuotaSpec, parent int)
	walk = func(spec *schedulingv1beta1.ElasticQuotaSpec, parent int) {
		pos := len(out.nodes)
		out.nodes = append(out.nodes, treeNode{name: spec.Name, parent: parent, min: spec.Min, max: spec.Max})
		if len(spec.Children) == 0 {
			for _, ns := range spec.Namespaces {
				out.leafOf[ns] = pos
			}
		}
		for i := range spec.Children {
			walk(&spec.Children[i], pos)
		}
	}
	walk(&t.Spec.Root, -1)
	return out
}

// verdict reads the scheduler's judgement of the tree's current generation.
func verdict(t *schedulingv1beta1.ElasticQuotaTree) (judged, valid bool) {
	cond := meta.FindStatusCondition(t.Status.Conditions, schedulingv1beta1.ConditionValid)
	if cond == nil || t.Status.ObservedGeneration != t.Generation {
		return false, false
	}
	return true, cond.Status == metav1.ConditionTrue
}

// chooseTreeLocked puts the oldest kube-system tree's last valid generation in
// force. An invalid generation leaves the tree in force as it was; one not
// judged yet defers admissions until it is.
func (o *Oracle) chooseTreeLocked() {
	var chosen *treeObject
	for _, name := range sortedKeys(o.trees) {
		t := o.trees[name]
		if chosen == nil || t.object.CreationTimestamp.Before(&chosen.object.CreationTimestamp) {
			chosen = t
		}
	}
	wasPending := o.pending
	o.pending = false
	switch {
	case chosen == nil:
		o.inForce = nil
	default:
		judged, valid := verdict(chosen.object)
		switch {
		case !judged:
			o.pending = true
		case valid:
			o.inForce = chosen.lastValid
		}
	}
	o.noteTreeLocked()
	if wasPending && !o.pending {
		deferred := o.deferred
		o.deferred = nil
		for _, uid := range deferred {
			if st := o.pods[uid]; st != nil && st.counted {
				o.judgeAdmissionLocked(st, o.admittedLocked(st), "bound while the tree was being judged")
			}
		}
	}
}

// usageLocked sums the requests of every counted pod of t's namespaces up
// the tree: what admission charges, pods being deleted included.
func (o *Oracle) usageLocked(t *quotaTree) []corev1.ResourceList {
	return o.sumLocked(t, func(*podState) bool { return true })
}

// staysLocked sums, up the tree, the requests of the counted pods of t's
// namespaces that are not being deleted: what a leaf keeps of its min once
// the pods on their way out are gone.
func (o *Oracle) staysLocked(t *quotaTree) []corev1.ResourceList {
	return o.sumLocked(t, func(st *podState) bool { return st.pod.DeletionTimestamp == nil })
}

func (o *Oracle) sumLocked(t *quotaTree, include func(*podState) bool) []corev1.ResourceList {
	used := make([]corev1.ResourceList, len(t.nodes))
	for i := range used {
		used[i] = corev1.ResourceList{}
	}
	for _, st := range o.pods {
		leaf, ok := t.leafOf[st.pod.Namespace]
		if !st.counted || !ok || !include(st) {
			continue
		}
		for pos := leaf; pos >= 0; pos = t.nodes[pos].parent {
			for name, q := range st.requests {
				sum := used[pos][name]
				sum.Add(q)
				used[pos][name] = sum
			}
		}
	}
	o.addDevicesLocked(t, used, include)
	return used
}

// leafLocked is the tree in force and pod's leaf in it; false when no tree
// is in force or none of its leaves lists the pod's namespace.
func (o *Oracle) leafLocked(pod *corev1.Pod) (*quotaTree, int, bool) {
	if o.inForce == nil {
		return nil, 0, false
	}
	leaf, ok := o.inForce.leafOf[pod.Namespace]
	return o.inForce, leaf, ok
}

// judgeAdmissionLocked checks, at the moment st's pod was admitted with
// resources, its leaf and every ancestor against their max on those resources.
func (o *Oracle) judgeAdmissionLocked(st *podState, resources []corev1.ResourceName, how string) {
	if o.pending {
		o.deferred = append(o.deferred, st.pod.UID)
		return
	}
	t, leaf, ok := o.leafLocked(st.pod)
	if !ok {
		return
	}
	used := o.usageLocked(t)
	for pos := leaf; pos >= 0; pos = t.nodes[pos].parent {
		n := t.nodes[pos]
		for _, r := range resources {
			max, limited := n.max[r]
			if sum := used[pos][r]; limited && sum.Cmp(max) > 0 {
				o.violateLocked(fmt.Sprintf("quota node %q of %s: bound pods request %s %s, over its max %s, once pod %s/%s was %s",
					n.name, t.object, r, sum.String(), max.String(), st.pod.Namespace, st.pod.Name, how))
			}
		}
	}
}

// stoppedLocked handles a pod that no longer holds capacity. A pod the
// scheduler preempted counts as a reclaim, and its eviction is judged now if
// its deletion was never seen.
func (o *Oracle) stoppedLocked(st *podState) {
	if st.disruption != corev1.PodReasonPreemptionByScheduler {
		return
	}
	o.counts.Reclaims++
	o.judgeEvictionLocked(st)
}

// judgeEvictionLocked checks, at the moment the scheduler deleted st's pod
// for a preemption (or, if that moment was missed, when the pod stopped),
// that the victim's leaf keeps its min on what the victim held. Pods already
// being deleted count as gone, as the scheduler counts them: judged any later,
// a team's own deletions after the preemption would count against the
// scheduler.
func (o *Oracle) judgeEvictionLocked(st *podState) {
	if st.evictionJudged {
		return
	}
	st.evictionJudged = true
	t, leaf, ok := o.leafLocked(st.pod)
	if !ok {
		return
	}
	stays := o.staysLocked(t)[leaf]
	n := t.nodes[leaf]
	for _, r := range requested(st.requests) {
		min, guaranteed := n.min[r]
		if sum := stays[r]; guaranteed && sum.Cmp(min) < 0 {
			o.belowMin = append(o.belowMin, belowMinEviction{victim: st.pod, tree: t, leaf: leaf, leafRival: st.leafRival,
				message: fmt.Sprintf("evicting %s/%s left quota node %q of %s at %s %s, below its min %s",
					st.pod.Namespace, st.pod.Name, n.name, t.object, r, sum.String(), min.String())})
			return
		}
	}
}

// pendingRivalLocked reports whether a pod of victim's leaf with a higher
// priority than victim's waits to be scheduled.
func (o *Oracle) pendingRivalLocked(victim *corev1.Pod) bool {
	t, leaf, ok := o.leafLocked(victim)
	if !ok {
		return false
	}
	for _, st := range o.pods {
		p := st.pod
		if l, governed := t.leafOf[p.Namespace]; governed && l == leaf && p.Spec.NodeName == "" &&
			p.DeletionTimestamp == nil && priority(p) > priority(victim) {
			return true
		}
	}
	return false
}

func priority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority == nil {
		return 0
	}
	return *pod.Spec.Priority
}

// occupies reports whether a pod holds capacity: bound and not finished.
func occupies(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// podRequests are the effective requests the v1.37 kube-scheduler computes:
// init and sidecar containers, pod-level resources, overhead, and the
// allocated resources of a resize in progress.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
	})
}

// requested are the resources a request asks a positive amount of, sorted.
func requested(requests corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range sortedKeys(requests) {
		if q := requests[name]; q.Sign() > 0 {
			out = append(out, name)
		}
	}
	return out
}

// grownResources are the resources after asks more of than before, sorted.
func grownResources(before, after corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range requested(after) {
		if q, old := after[name], before[name]; q.Cmp(old) > 0 {
			out = append(out, name)
		}
	}
	return out
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
