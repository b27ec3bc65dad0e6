package capacityscheduling

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestPreemptionCountsLeavingPodsAsGone: pods an earlier preemption evicted
// still run out their grace period, and still hold quota. A second preemption
// must not count them as room above their leaf's min: evicting them is under
// way, so another of the leaf's pods would take it below its min once they
// are gone. This is what a scheduler that restarted mid-reclaim, or a priority
// preemption beside a reclaim, would otherwise do.
func TestPreemptionCountsLeavingPodsAsGone(t *testing.T) {
	// team-b's min is 4; it runs 8 on n1, 4 of them borrowed.
	for _, leaving := range [][]string{nil, {"team-b-low-1", "team-b-low-2"}} {
		preemptor := testPod("p", "team-a", "2", "", high, 0)
		w := world{tree: borrowerTree, nodes: []*corev1.Node{node("n1", "8")}, pods: append(fourLow("team-b"), preemptor)}
		h := newHarness(t, w)
		for _, p := range w.pods {
			if slices.Contains(leaving, p.Name) {
				deleting := p.DeepCopy()
				deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				h.plugin.cache.updatePod(nil, deleting)
			}
		}
		state, _ := h.preFilter(preemptor)
		_, status := h.plugin.PostFilter(h.ctx, state, preemptor, h.unschedulableEverywhere(w.nodes))
		victims := h.victims()
		var takenBelowMin []string
		for _, v := range victims {
			if !slices.Contains(leaving, v) {
				takenBelowMin = append(takenBelowMin, v)
			}
		}
		switch {
		case leaving == nil && len(victims) == 0:
			t.Fatalf("with nothing leaving, team-b's borrowed pods were not preempted (status %v): the case shows nothing", status)
		case leaving != nil && len(takenBelowMin) > 0:
			t.Errorf("with %v leaving, PostFilter also evicted %v, taking team-b below its min of 4 (status %v)", leaving, takenBelowMin, status)
		}
	}
}

// TestPreemptionMarksItsVictimsLeaving: the API shows a victim's deletion
// only after the preemption that chose it has returned, and the next
// scheduling cycle may start before. A second preemption must still count
// the first one's victim as gone.
func TestPreemptionMarksItsVictimsLeaving(t *testing.T) {
	// team-b's min is 4; it runs 6, one 2-cpu pod on each full node: it can
	// give one pod, not two.
	nodes := []*corev1.Node{node("n1", "2"), node("n2", "2"), node("n3", "2")}
	teamB := []*corev1.Pod{
		testPod("team-b-1", "team-b", "2", "n1", low, 3*time.Hour),
		testPod("team-b-2", "team-b", "2", "n2", low, 2*time.Hour),
		testPod("team-b-3", "team-b", "2", "n3", low, time.Hour),
	}
	first, second := testPod("first", "team-a", "2", "", high, 0), testPod("second", "team-a", "2", "", high, 0)
	// preempt runs PostFilter for pod with only node's filter failing for
	// room, as a pod pinned to that node.
	preempt := func(h *harness, pod *corev1.Pod, node string) {
		state, _ := h.preFilter(pod)
		m := framework.NewDefaultNodeToStatus()
		m.Set(node, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
		if _, status := h.plugin.PostFilter(h.ctx, state, pod, m); status.Code() == fwk.Error {
			t.Fatalf("PostFilter for %s: %v", pod.Name, status)
		}
	}

	alone := newHarness(t, world{tree: borrowerTree, nodes: nodes, pods: append(slices.Clone(teamB), second)})
	preempt(alone, second, "n2")
	if diff := cmp.Diff([]string{"team-b-2"}, alone.victims()); diff != "" {
		t.Fatalf("alone, the second preemptor did not take one of team-b's borrowed pods (-want +got):\n%s", diff)
	}

	h := newHarness(t, world{tree: borrowerTree, nodes: nodes, pods: append(slices.Clone(teamB), first, second)})
	preempt(h, first, "n1")
	preempt(h, second, "n2")
	if diff := cmp.Diff([]string{"team-b-1"}, h.victims()); diff != "" {
		t.Errorf("back to back, the two preemptions took team-b from 6 below its min of 4 (-want +got):\n%s", diff)
	}
}
