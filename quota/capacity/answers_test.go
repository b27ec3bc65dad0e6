package capacity

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// TestOnlyChangesNearAnAnswerRecomputeIt: the differential property test
// proves remembered answers right; this one pins that they are remembered, so
// a loop does not quietly fall back to computing everything.
func TestOnlyChangesNearAnAnswerRecomputeIt(t *testing.T) {
	pool := map[string]string{"pool": "a"}
	set := Build([]*autoscalingv1beta1.CapacityQuota{
		capacityQuota("pool-a", &metav1.LabelSelector{MatchLabels: pool}, limits("cpu", "40")),
	}, Options{})
	template := node("template", pool, coreList("cpu", "2"))
	remembered := func() bool { return set.groups["grp"].answer.valid }

	if k, _ := set.AllowedDeltaFor("grp", template, 5); k != 5 {
		t.Fatalf("allowed %d of 5 on an empty pool", k)
	}
	// 40 - 8 = 32 cpu of headroom stays above 5 nodes of 2 cpu.
	set.AddNode(node("n1", withHostname(pool, "n1"), coreList("cpu", "8")))
	if !remembered() {
		t.Error("a change far from the limit forgot the answer")
	}
	set.SetUpcoming("other", 1, template.DeepCopy())
	set.SetUpcoming("other", 1, template.DeepCopy()) // the same nodes again
	if !remembered() {
		t.Error("a change far from the limit forgot the answer")
	}
	// 40 - 8 - 2 - 24 = 6 cpu: three nodes.
	set.AddNode(node("n2", withHostname(pool, "n2"), coreList("cpu", "24")))
	if remembered() {
		t.Fatal("a change that binds the answer left it remembered")
	}
	if k, exceeded := set.AllowedDeltaFor("grp", template, 5); k != 3 || len(exceeded) != 1 {
		t.Fatalf("allowed %d %+v, want 3 and pool-a", k, exceeded)
	}
	// Bound at 3, the answer reads the limit up to 4 nodes' headroom (8 cpu).
	set.RemoveNode("n1") // 14 cpu
	if remembered() {
		t.Error("a change across the bound left the answer remembered")
	}
	if k, _ := set.AllowedDeltaFor("grp", template, 5); k != 5 {
		t.Errorf("allowed %d of 5 with 14 cpu of headroom", k)
	}
}
