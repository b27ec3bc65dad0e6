package elastic

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestWithoutIsThePlansUsage: what a reclaim plan makes room for is admitted
// against Without(the plan's victims), and not against Without of fewer.
func TestWithoutIsThePlansUsage(t *testing.T) {
	// root max 10; a: min 6 max 10, idle; b: min 2 max 10, using 8.
	tree := mustBuild(t, flatTree("cpu", "10", [3]string{"a", "6", "10"}, [3]string{"b", "2", "10"}))
	var candidates []Candidate
	for _, uid := range []types.UID{"b-1", "b-2", "b-3", "b-4"} {
		tree.AddRequests(uid, "b", cpu("2"))
		candidates = append(candidates, Candidate{UID: uid})
	}
	plan, ok := tree.PlanReclaim(Preemptor{Namespace: "a", Requests: cpu("4")}, candidates)
	if !ok || len(plan.Victims) != 1 {
		t.Fatalf("PlanReclaim(a, 4 cpu) = %v, %v; want one victim of b", plan, ok)
	}
	if v := tree.Without(plan.Victims).Admit("a", cpu("4")); !v.Admitted() {
		t.Errorf("Without(the plan's victims) refuses what the plan made room for: %s", v.Message())
	}
	if v := tree.Without(nil).Admit("a", cpu("4")); v.Admitted() {
		t.Error("Without(nothing) admits 4 cpu with 8 of 10 used")
	}
	// A pod already leaving is released whether or not it is named, once.
	tree.MarkLeaving("b-1")
	if v := tree.Without(nil).Admit("a", cpu("4")); !v.Admitted() {
		t.Errorf("Without(nothing) still counts the leaving pod: %s", v.Message())
	}
	if v := tree.Without([]types.UID{"b-1", "untracked"}).Admit("a", cpu("5")); v.Admitted() {
		t.Error("Without released the leaving pod twice, or an untracked one")
	}
	if used, _ := tree.Used("root"); used.Cpu().String() != "8" {
		t.Errorf("Without changed the tree: root uses %s, want 8", used.Cpu())
	}
}
