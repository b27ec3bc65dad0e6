package capacityscheduling

import (
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/quota/elastic"
)

// TestPodGroupPostFilterWhenNoPodReachedPreFilter: a pod group cycle in which
// no pod got through PreFilter (no node at all, as before a scale-up from
// zero) ends unresolvable at this plugin, governed or not, so that the
// PodGroupPostFilter plugins after it do not run (DynamicResources' errors on
// the state its PreFilter never wrote). Once a pod of the cycle reached
// PreFilter, the plugin answers as before.
func TestPodGroupPostFilterWhenNoPodReachedPreFilter(t *testing.T) {
	h := gangHarness(t, gangTree)
	h.waitForTree("the tree in force", func(tree *elastic.Tree) bool { return tree != nil })
	for _, tc := range []struct {
		namespace string
		// reached runs a pod of the group through PreFilter first.
		reached bool
		want    fwk.Code
	}{
		{namespace: "team-a", want: fwk.UnschedulableAndUnresolvable},
		{namespace: "ungoverned", want: fwk.UnschedulableAndUnresolvable},
		// A governed group its quota admitted does not preempt.
		{namespace: "team-a", reached: true, want: fwk.Unschedulable},
	} {
		pgState := framework.NewCycleState()
		if tc.reached {
			podState := framework.NewCycleState()
			podState.SetPodGroupSchedulingCycle(pgState)
			if _, status, _ := h.framework.RunPreFilterPlugins(h.ctx, podState, testPod("worker-0", tc.namespace, "1", "", low, time.Minute)); !status.IsSuccess() {
				t.Fatalf("PreFilter: %v", status)
			}
		}
		pgInfo := &framework.PodGroupInfo{Namespace: tc.namespace, Name: "train", Type: fwk.PodGroupKeyType}
		_, status := h.plugin.PodGroupPostFilter(h.ctx, pgState, pgInfo, nil)
		if status.Code() != tc.want {
			t.Errorf("%s, a pod reached PreFilter %v: PodGroupPostFilter = %v, want %v", tc.namespace, tc.reached, status, tc.want)
		}
	}
}
