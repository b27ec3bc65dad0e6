package capacityscheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodUpdatesKeepWhatTheyDoNotChange: the informer's update of a pod reuses
// what the plugin computed for the version before when the update changes
// nothing the pod is charged: the binding of a reserved pod, a status update
// of a bound pod and a condition on a pending one compute no requests again
// (and so allocate nothing). An update that changes the requests charges the
// new ones.
func TestPodUpdatesKeepWhatTheyDoNotChange(t *testing.T) {
	h := newHarness(t, world{tree: flatTree(2), nodes: []*corev1.Node{node("n1", "200")}})
	const runs = 20
	var pending, bound []*corev1.Pod
	for i := range runs + 1 { // AllocsPerRun runs once more to warm up
		p := testPod(fmt.Sprintf("p-%d", i), "ns-0", "1", "", high, 0)
		h.plugin.onPod(nil, p)
		if _, status := h.reserve(p); !status.IsSuccess() {
			t.Fatalf("reserving %s: %v", p.Name, status)
		}
		b := p.DeepCopy()
		b.Spec.NodeName = "n1"
		pending, bound = append(pending, p), append(bound, b)
	}
	i := 0
	if allocs := testing.AllocsPerRun(runs, func() { h.plugin.onPod(pending[i], bound[i]); i++ }); allocs != 0 {
		t.Errorf("the update binding a reserved pod allocates %v times, want 0: its requests were computed again", allocs)
	}
	if got, want := h.usedCPU("q-0"), fmt.Sprint(runs+1); got != want {
		t.Fatalf("q-0 uses %s cpu after the bindings, want %s", got, want)
	}

	running := bound[0].DeepCopy()
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: running.Spec.Containers[0].Name, Ready: true}}
	if allocs := testing.AllocsPerRun(runs, func() { h.plugin.onPod(bound[0], running) }); allocs != 0 {
		t.Errorf("a status update of a bound pod allocates %v times, want 0", allocs)
	}

	resized := running.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	h.plugin.onPod(running, resized)
	if got, want := h.usedCPU("q-0"), fmt.Sprint(runs+3); got != want {
		t.Errorf("q-0 uses %s cpu after a pod's resize from 1 to 3, want %s", got, want)
	}

	waiting := testPod("waiting", "ns-1", "1", "", high, 0)
	h.plugin.onPod(nil, waiting)
	tried := waiting.DeepCopy()
	tried.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	h.plugin.cache.mu.Lock()
	before := h.plugin.cache.requests[waiting.UID].requests
	h.plugin.cache.mu.Unlock()
	h.plugin.onPod(waiting, tried)
	h.plugin.cache.mu.Lock()
	after := h.plugin.cache.requests[tried.UID]
	h.plugin.cache.mu.Unlock()
	if after.pod != tried || fmt.Sprintf("%p", after.requests) != fmt.Sprintf("%p", before) {
		t.Error("a pending pod's update that changes no request did not keep the requests computed for the version before")
	}
}
