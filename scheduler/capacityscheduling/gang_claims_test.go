package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
)

// TestGangCountsItsDevices: a gang asks for its members' devices as PreFilter
// charges a pod. Three members with a device each exceed team-a's 2 devices
// as a gang, though each alone fits; three members sharing one claim of 2
// devices ask for it once.
func TestGangCountsItsDevices(t *testing.T) {
	dra := []runtime.Object{gpuClass(), gpuClaim("team-a", "shared-gpu", "gpu.example.com", 2)}
	own := ackGang("team-a", "own", "3", 3, "1")
	for i, p := range own {
		name := fmt.Sprintf("own-gpu-%d", i)
		withTemplateClaim(p, name)
		dra = append(dra, ownedBy(gpuClaim("team-a", name, "gpu.example.com", 1), p))
	}
	shared := ackGang("team-a", "shared", "3", 3, "1")
	for _, p := range shared {
		withClaim(p, "shared-gpu")
	}
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: append(append([]*corev1.Pod(nil), own...), shared...), dra: dra})

	code, msg := h.preFilterCode(own[0])
	if code != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("a gang of 3 devices in a leaf of 2: PreFilter = %v %q, want refused", code, msg)
	}
	for _, want := range []string{"gang team-a/own of 3 pods", `"team-a"`, string(gpuDevices) + " used 0, requested 3, max 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("PreFilter message %q does not name %q", msg, want)
		}
	}
	if code, msg := h.preFilterCode(shared[0]); code != fwk.Skip {
		t.Errorf("a gang sharing one claim of 2 devices: PreFilter = %v %q, want admitted", code, msg)
	}
}
