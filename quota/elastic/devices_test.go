package elastic

import (
	"testing"

	"github.com/quotascale/quotascale/quota/resources"
)

// A device class is one more dimension: min and max, borrowing up to max,
// reclaim of what was borrowed, exactly as cpu.
func TestDeviceClassIsADimensionLikeCPU(t *testing.T) {
	gpus := string(resources.DeviceClassResource("gpu.example.com"))
	tree := mustBuild(t, flatTree(gpus, "4", [3]string{"a", "2", "4"}, [3]string{"b", "2", "4"}))
	tree.AddRequests("a1", "a", list(gpus, "2"))
	tree.AddRequests("a2", "a", list(gpus, "1"))
	if v := tree.Admit("a", list(gpus, "1")); !v.Admitted() {
		t.Errorf("a borrows up to its max: %s", v.Message())
	}
	v := tree.Admit("a", list(gpus, "2"))
	want := `exceeded elastic quota "a": ` + gpus + ` used 3, requested 2, max 4; exceeded elastic quota "root": ` + gpus + ` used 3, requested 2, max 4`
	if v.Admitted() || v.Message() != want {
		t.Errorf("past max: %q, want %q", v.Message(), want)
	}
	// b is below its min and a borrowed one device: a reclaim frees it, and
	// leaves a its min.
	plan, ok := tree.PlanReclaim(Preemptor{Namespace: "b", Requests: list(gpus, "2")}, []Candidate{{UID: "a1"}, {UID: "a2"}})
	if !ok || len(plan.Victims) != 1 || plan.Victims[0] != "a2" {
		t.Errorf("reclaim of borrowed devices: plan %v, %v; want a2 evicted", plan, ok)
	}
}
