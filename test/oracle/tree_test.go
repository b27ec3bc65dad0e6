package oracle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// teams is a root over two leaves, each with its own namespace.
func teams(rootMax, aMin, aMax, bMax string) schedulingv1beta1.ElasticQuotaSpec {
	return quotaNode("root", list("cpu=4"), list(rootMax), nil,
		quotaNode("a", list(aMin), list(aMax), list("ns-a")),
		quotaNode("b", list("cpu=1"), list(bMax), list("ns-b")))
}

func TestTreeMax(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(o *Oracle)
		want  []string
	}{
		{
			name: "a pod bound over its leaf's max",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=3"), false)
				o.SetPod(testPod("ns-a", "p2", "", "cpu=2"), false) // pending: not charged
				o.SetPod(testPod("ns-a", "p2", "n1", "cpu=2"), false)
			},
			want: []string{`quota node "a" of kube-system/t@1: bound pods request cpu 5, over its max 4, once pod ns-a/p2 was bound`},
		},
		{
			name: "a child's usage is charged to its parent",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=6", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "a1", "n1", "cpu=4"), false)
				o.SetPod(testPod("ns-b", "b1", "n1", "cpu=2"), false)
				o.SetPod(testPod("ns-b", "b2", "n1", "cpu=500m"), false)
			},
			want: []string{`quota node "root" of kube-system/t@1: bound pods request cpu 6500m, over its max 6, once pod ns-b/b2 was bound`},
		},
		{
			name: "finished pods and namespaces outside the tree are not charged",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=3"), false)
				o.SetPod(finished(testPod("ns-a", "p1", "n1", "cpu=3")), false)
				o.SetPod(testPod("ns-a", "p2", "n1", "cpu=4"), false)
				o.SetPod(testPod("elsewhere", "p3", "n1", "cpu=100"), false)
			},
		},
		{
			name: "a pod's init containers count as the scheduler counts them",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				p := testPod("ns-a", "p1", "n1", "cpu=1")
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: resourceList("cpu=5")}}}
				o.SetPod(p, false)
			},
			want: []string{`quota node "a" of kube-system/t@1: bound pods request cpu 5, over its max 4, once pod ns-a/p1 was bound`},
		},
		{
			name: "lowering a max evicts nothing; only resources a new pod asks for are judged",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=4"), false)
				o.SetTree(testTree("t", 0, 2, judgedValid, teams("cpu=8", "cpu=1", "cpu=2", "cpu=4")))
				o.SetPod(testPod("ns-a", "memory-only", "n1", "memory=1Gi"), false)
				o.SetPod(testPod("ns-a", "more-cpu", "n1", "cpu=1"), false)
			},
			want: []string{`quota node "a" of kube-system/t@2: bound pods request cpu 5, over its max 2, once pod ns-a/more-cpu was bound`},
		},
		{
			name: "a pod resized up is judged on what grew",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=2", "memory=1Gi"), false)
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=2", "memory=2Gi"), false)
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5", "memory=2Gi"), false)
			},
			want: []string{`quota node "a" of kube-system/t@1: bound pods request cpu 5, over its max 4, once pod ns-a/p1 was resized`},
		},
		{
			name: "pods listed at the start are the starting state",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5"), true)
			},
		},
		{
			name: "an invalid generation leaves the last valid one in force",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetTree(testTree("t", 0, 2, judgedInvalid, teams("cpu=8", "cpu=2", "cpu=100", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5"), false)
			},
			want: []string{`quota node "a" of kube-system/t@1: bound pods request cpu 5, over its max 4, once pod ns-a/p1 was bound`},
		},
		{
			name: "pods bound while a generation is judged are judged against it once valid",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=100", "cpu=4")))
				o.SetTree(testTree("t", 0, 2, unjudged, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5"), false)
				o.SetTree(testTree("t", 0, 2, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
			},
			want: []string{`quota node "a" of kube-system/t@2: bound pods request cpu 5, over its max 4, once pod ns-a/p1 was bound while the tree was being judged`},
		},
		{
			name: "pods bound while a generation is judged are judged against the last valid one if it is not",
			steps: func(o *Oracle) {
				o.SetTree(testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=100", "cpu=4")))
				o.SetTree(testTree("t", 0, 2, unjudged, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5"), false)
				o.SetTree(testTree("t", 0, 2, judgedInvalid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
			},
		},
		{
			name: "the oldest tree in kube-system is in force",
			steps: func(o *Oracle) {
				o.SetTree(testTree("newer", 5, 1, judgedValid, teams("cpu=100", "cpu=2", "cpu=100", "cpu=4")))
				o.SetTree(testTree("older", 1, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4")))
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5"), false)
				o.DeleteTree("kube-system", "older")
				o.SetPod(testPod("ns-a", "p2", "n1", "cpu=5"), false)
			},
			want: []string{`quota node "a" of kube-system/older@1: bound pods request cpu 5, over its max 4, once pod ns-a/p1 was bound`},
		},
		{
			name: "trees outside kube-system are never in force",
			steps: func(o *Oracle) {
				tree := testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=4", "cpu=4"))
				tree.Namespace = "default"
				o.SetTree(tree)
				o.SetPod(testPod("ns-a", "p1", "n1", "cpu=5"), false)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReclaimAndDisruption(t *testing.T) {
	tree := testTree("t", 0, 1, judgedValid, teams("cpu=8", "cpu=2", "cpu=8", "cpu=8"))
	a1, a2 := testPod("ns-a", "a1", "n1", "cpu=1"), testPod("ns-a", "a2", "n1", "cpu=1")
	a3 := testPod("ns-a", "a3", "n1", "cpu=1")
	b1 := testPod("ns-b", "b1", "n1", "cpu=1")
	ungovernedHigh, ungovernedLow := testPod("ns-free", "high", "", "cpu=1"), testPod("ns-free", "low", "", "cpu=1")
	ungovernedHigh.Spec.Priority = ptr.To[int32](10)
	preempted := func(o *Oracle, p *corev1.Pod) {
		o.SetPod(disrupted(p, corev1.PodReasonPreemptionByScheduler), false)
		o.DeletePod(disrupted(p, corev1.PodReasonPreemptionByScheduler))
	}
	for _, tc := range []struct {
		name       string
		steps      func(o *Oracle)
		preemptors map[string]types.UID
		want       []string
		counts     Counts
		unjudged   []string
	}{
		{
			name: "a reclaim from a leaf above its min",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(a2, false)
				o.SetPod(a3, false)
				preempted(o, a3)
			},
			counts: Counts{Reclaims: 1},
		},
		{
			name: "a reclaim that leaves the leaf below its min",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(a2, false)
				o.SetPod(b1, false)
				preempted(o, a2)
			},
			preemptors: map[string]types.UID{"a2": b1.UID},
			want:       []string{`evicting ns-a/a2 left quota node "a" of kube-system/t@1 at cpu 1, below its min 2, for pod ns-b/b1 of namespace ns-b`},
			counts:     Counts{Reclaims: 1},
		},
		{
			// The scheduler judged a3's eviction against a1 and a2; the
			// team's own deletion of a1 afterwards is not the scheduler's.
			name: "a team deleting a pod of the leaf while a reclaim victim terminates",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(a2, false)
				o.SetPod(a3, false)
				o.SetPod(disrupted(a3, corev1.PodReasonPreemptionByScheduler), false)
				o.SetPod(deleting(disrupted(a3, corev1.PodReasonPreemptionByScheduler)), false)
				o.SetPod(deleting(a1), false)
				o.DeletePod(deleting(a1))
				o.DeletePod(deleting(disrupted(a3, corev1.PodReasonPreemptionByScheduler)))
			},
			counts: Counts{Reclaims: 1},
		},
		{
			// a3 still runs while it terminates, but the leaf keeps only a1
			// once both victims are gone.
			name: "a second reclaim victim deleted while the first terminates",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(a2, false)
				o.SetPod(a3, false)
				o.SetPod(b1, false)
				o.SetPod(deleting(disrupted(a3, corev1.PodReasonPreemptionByScheduler)), false)
				o.SetPod(deleting(disrupted(a2, corev1.PodReasonPreemptionByScheduler)), false)
				o.DeletePod(deleting(disrupted(a3, corev1.PodReasonPreemptionByScheduler)))
				o.DeletePod(deleting(disrupted(a2, corev1.PodReasonPreemptionByScheduler)))
			},
			preemptors: map[string]types.UID{"a2": b1.UID, "a3": b1.UID},
			want:       []string{`evicting ns-a/a2 left quota node "a" of kube-system/t@1 at cpu 1, below its min 2, for pod ns-b/b1 of namespace ns-b`},
			counts:     Counts{Reclaims: 2},
		},
		{
			name: "priority preemption inside one leaf may go below its min",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(a2, false)
				preempted(o, a2)
				o.SetPod(a3, false)
			},
			preemptors: map[string]types.UID{"a2": a3.UID},
			counts:     Counts{Reclaims: 1},
		},
		{
			name: "priority preemption by a pod no tree governs may go below its min",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(ungovernedHigh, false)
				preempted(o, a1)
			},
			preemptors: map[string]types.UID{"a1": ungovernedHigh.UID},
			counts:     Counts{Reclaims: 1},
		},
		{
			name: "a preemptor no tree governs, not above the victim's priority",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(ungovernedLow, false)
				preempted(o, a1)
			},
			preemptors: map[string]types.UID{"a1": ungovernedLow.UID},
			want:       []string{`evicting ns-a/a1 left quota node "a" of kube-system/t@1 at cpu 0, below its min 2, for pod ns-free/low of namespace ns-free, which no tree governs, at priority 0, not above the victim's 0`},
			counts:     Counts{Reclaims: 1},
		},
		{
			name: "a preemptor that cannot be named",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				preempted(o, a1)
			},
			want:   []string{`evicting ns-a/a1 left quota node "a" of kube-system/t@1 at cpu 0, below its min 2, and no pod of its leaf with a higher priority was pending (preemptor unknown: no Preempted event for a1)`},
			counts: Counts{Reclaims: 1},
		},
		{
			name: "a preemptor that cannot be named while a rival of its leaf was pending",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(testPod("ns-b", "b-high", "", "cpu=1"), false) // of another leaf: no rival
				low := testPod("ns-a", "a-low", "", "cpu=1")
				low.Spec.Priority = ptr.To[int32](-1) // lower than the victim's: no rival
				o.SetPod(low, false)
				preempted(o, a1)
			},
			want:   []string{`evicting ns-a/a1 left quota node "a" of kube-system/t@1 at cpu 0, below its min 2, and no pod of its leaf with a higher priority was pending (preemptor unknown: no Preempted event for a1)`},
			counts: Counts{Reclaims: 1},
		},
		{
			name: "a preemptor that cannot be named while a rival of its leaf was pending is unjudged",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				high := testPod("ns-a", "a-high", "", "cpu=1")
				high.Spec.Priority = ptr.To[int32](10)
				o.SetPod(high, false)
				preempted(o, a1)
			},
			unjudged: []string{`evicting ns-a/a1 left quota node "a" of kube-system/t@1 at cpu 0, below its min 2 (preemptor unknown: no Preempted event for a1)`},
			counts:   Counts{Reclaims: 1},
		},
		{
			name: "a preemptor the oracle never saw",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				preempted(o, a1)
			},
			preemptors: map[string]types.UID{"a1": "elsewhere"},
			want:       []string{`evicting ns-a/a1 left quota node "a" of kube-system/t@1 at cpu 0, below its min 2, for pod elsewhere the oracle never saw`},
			counts:     Counts{Reclaims: 1},
		},
		{
			name: "a drain of a node marked for deletion",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				node := testNode("n1", 0, nil, "cpu=4")
				node.Spec.Taints = []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
				o.SetNode(node)
				o.SetPod(disrupted(a1, evictionByEvictionAPI), false)
				o.SetPod(disrupted(a1, evictionByEvictionAPI), false) // seen again: counted once
				o.DeletePod(disrupted(a1, evictionByEvictionAPI))
			},
			counts: Counts{Drained: 1},
		},
		{
			name: "an eviction from a node not marked for deletion",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetNode(testNode("n1", 0, nil, "cpu=4"))
				o.DeletePod(disrupted(a1, evictionByEvictionAPI))
			},
			want: []string{"pod ns-a/a1 on n1 evicted (EvictionByEvictionAPI), and the node was never marked for scale-down: neither a reclaim nor a scale-down drain"},
		},
		{
			// Nodes and pods come through separate informers: a drain's
			// eviction may be seen before the node's taint.
			name: "a drain's eviction seen before its node's taint",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				node := testNode("n1", 0, nil, "cpu=4")
				o.SetNode(node)
				o.SetPod(disrupted(a1, evictionByEvictionAPI), false)
				marked := node.DeepCopy()
				marked.Spec.Taints = []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
				o.SetNode(marked)
				o.SetNode(marked) // seen again: counted once
			},
			counts: Counts{Drained: 1},
		},
		{
			// After an outage, the watch may learn of a node's deletion only
			// from the relist: its mark may have come and gone unseen.
			name: "an eviction from a node deleted while the watch was down",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetNode(testNode("n1", 0, nil, "cpu=4"))
				o.DeletePod(disrupted(a1, evictionByEvictionAPI))
				o.DeleteNodeUnseen("n1")
			},
			unjudged: []string{"pod ns-a/a1 on n1 evicted (EvictionByEvictionAPI), and the node was never marked for scale-down: neither a reclaim nor a scale-down drain (unknown: the node was deleted while the watch was down)"},
		},
		{
			name: "an eviction from a node deleted in plain sight, never marked",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetNode(testNode("n1", 0, nil, "cpu=4"))
				o.DeletePod(disrupted(a1, evictionByEvictionAPI))
				o.DeleteNode("n1")
			},
			want: []string{"pod ns-a/a1 on n1 evicted (EvictionByEvictionAPI), and the node was never marked for scale-down: neither a reclaim nor a scale-down drain"},
		},
		{
			name: "a disruption for another reason",
			steps: func(o *Oracle) {
				o.SetPod(a1, false)
				o.SetPod(disrupted(a1, "DeletionByTaintManager"), false)
			},
			want: []string{"pod ns-a/a1 on n1 disrupted for DeletionByTaintManager, neither a reclaim nor a scale-down drain"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			o.SetTree(tree)
			tc.steps(o)
			violations, unjudged := o.Verdict(preemptors(tc.preemptors))
			if diff := cmp.Diff(tc.want, violations); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.unjudged, unjudged); diff != "" {
				t.Errorf("unjudged (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.counts, o.Counts()); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}
