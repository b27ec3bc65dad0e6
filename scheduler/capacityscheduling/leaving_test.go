package capacityscheduling

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
				h.plugin.cache.updatePod(deleting)
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
