package resources

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"pgregory.net/rapid"
)

// statusAware is the computation PodRequests stands for on every pod: the
// helper reading status resources.
func statusAware(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
	})
}

// drawList is a small cpu/memory list, empty or nil at times, with amounts
// written in more than one format.
func drawList(t *rapid.T, label string) corev1.ResourceList {
	if rapid.IntRange(0, 4).Draw(t, label+"-nil") == 0 {
		return nil
	}
	list := corev1.ResourceList{}
	if rapid.Bool().Draw(t, label+"-cpu") {
		m := rapid.IntRange(0, 4000).Draw(t, label+"-millicpu")
		if m%1000 == 0 && rapid.Bool().Draw(t, label+"-whole") {
			list[corev1.ResourceCPU] = resource.MustParse(fmt.Sprint(m / 1000))
		} else {
			list[corev1.ResourceCPU] = resource.MustParse(fmt.Sprintf("%dm", m))
		}
	}
	if rapid.Bool().Draw(t, label+"-memory") {
		list[corev1.ResourceMemory] = resource.MustParse(fmt.Sprintf("%dMi", rapid.IntRange(0, 64).Draw(t, label+"-mi")))
	}
	if rapid.IntRange(0, 3).Draw(t, label+"-device") == 0 {
		// An amount past int64, which Quantity keeps as an inf.Dec that Add
		// changes in place.
		list["example.com/device"] = resource.MustParse(fmt.Sprintf("%d0000000000000000000", rapid.IntRange(1, 9).Draw(t, label+"-huge")))
	}
	return list
}

// drawPod is a pod with containers, init containers (some restartable),
// overhead and pod-level requests, and a status that may report allocated or
// actuated resources and an infeasible resize.
func drawPod(t *rapid.T) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{}
	containers := func(label string, n int, init bool) []corev1.Container {
		var out []corev1.Container
		for i := range n {
			c := corev1.Container{Name: fmt.Sprintf("%s-%d", label, i), Resources: corev1.ResourceRequirements{Requests: drawList(t, fmt.Sprintf("%s-%d", label, i))}}
			if init && rapid.Bool().Draw(t, c.Name+"-sidecar") {
				c.RestartPolicy = &always
			}
			out = append(out, c)
		}
		return out
	}
	pod.Spec.Containers = containers("c", rapid.IntRange(1, 3).Draw(t, "containers"), false)
	pod.Spec.InitContainers = containers("i", rapid.IntRange(0, 3).Draw(t, "inits"), true)
	pod.Spec.Overhead = drawList(t, "overhead")
	if rapid.Bool().Draw(t, "pod-level") {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: drawList(t, "pod")}
	}
	for _, c := range append(pod.Spec.Containers, pod.Spec.InitContainers...) {
		if !rapid.Bool().Draw(t, c.Name+"-status") {
			continue
		}
		s := corev1.ContainerStatus{Name: c.Name}
		if rapid.Bool().Draw(t, c.Name+"-allocated") {
			s.AllocatedResources = drawList(t, c.Name+"-allocated-list")
		}
		if rapid.Bool().Draw(t, c.Name+"-actuated") {
			s.Resources = &corev1.ResourceRequirements{Requests: drawList(t, c.Name+"-actuated-list")}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, s)
	}
	if rapid.IntRange(0, 5).Draw(t, "pod-status") == 0 {
		pod.Status.AllocatedResources = drawList(t, "pod-allocated")
		pod.Status.Resources = &corev1.ResourceRequirements{Requests: drawList(t, "pod-actuated")}
	}
	if rapid.IntRange(0, 5).Draw(t, "infeasible") == 0 {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
	}
	return pod
}

// TestPropertyPodRequestsIsTheStatusAwareHelper: the spec-only shortcut gives
// what the status-aware helper gives, on every pod.
func TestPropertyPodRequestsIsTheStatusAwareHelper(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pod := drawPod(t)
		if diff := cmp.Diff(statusAware(pod), PodRequests(pod), quantityEqual); diff != "" {
			t.Fatalf("PodRequests differs from the status-aware helper (-want +got):\n%s", diff)
		}
	})
}

// TestPropertyPodRequestsFromTheSpec: on pods whose status reports no
// resources, the spec-only sum gives what the helper gives with the spec-only
// options, sidecars and pod-level requests or not, and leaves the pod as it
// was.
func TestPropertyPodRequestsFromTheSpec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pod := drawPod(t)
		pod.Status = corev1.PodStatus{}
		if rapid.Bool().Draw(t, "no-pod-level") {
			pod.Spec.Resources = nil
		}
		before := pod.DeepCopy()
		want := resourcehelper.PodRequests(before.DeepCopy(), resourcehelper.PodResourcesOptions{})
		if diff := cmp.Diff(want, PodRequests(pod), quantityEqual); diff != "" {
			t.Fatalf("PodRequests differs from the spec-only helper (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, pod, quantityEqual); diff != "" {
			t.Fatalf("PodRequests changed the pod (-before +after):\n%s", diff)
		}
	})
}

// TestPropertySameRequests: SameRequests never says two pods are charged the
// same when they are not, and says so for a copy of a pod computed from its
// spec, whatever else of the copy changed (node, phase, labels).
func TestPropertySameRequests(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := drawPod(t), drawPod(t)
		if SameRequests(a, b) {
			if diff := cmp.Diff(statusAware(a), statusAware(b), quantityEqual); diff != "" {
				t.Fatalf("SameRequests, but the requests differ (-a +b):\n%s", diff)
			}
		}
		c := a.DeepCopy()
		c.Spec.NodeName, c.Status.Phase, c.Labels = "n1", corev1.PodRunning, map[string]string{"x": "y"}
		if got, want := SameRequests(a, c), requestsFromSpec(a); got != want {
			t.Fatalf("SameRequests(pod, its bound copy) = %v, want %v (computed from its spec: %v)", got, want, want)
		}
	})
}

// TestSameRequestsSeesEachInput: each input PodRequests reads, changed alone,
// makes SameRequests false.
func TestSameRequestsSeesEachInput(t *testing.T) {
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	always := corev1.ContainerRestartPolicyAlways
	base := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}},
		InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: cpu("2")}}},
		Overhead:       cpu("100m"),
		Resources:      &corev1.ResourceRequirements{Requests: cpu("3")},
	}}
	same := base.DeepCopy()
	same.Spec.Containers[0].Resources.Requests = cpu("1000m")
	if !SameRequests(base, same) {
		t.Error("1 and 1000m cpu are not the same requests")
	}
	for name, change := range map[string]func(p *corev1.Pod){
		"container request":  func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = cpu("2") },
		"one more container": func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b"}) },
		"init container":     func(p *corev1.Pod) { p.Spec.InitContainers[0].Resources.Requests = cpu("1") },
		"sidecar":            func(p *corev1.Pod) { p.Spec.InitContainers[0].RestartPolicy = &always },
		"overhead":           func(p *corev1.Pod) { p.Spec.Overhead = nil },
		"pod-level requests": func(p *corev1.Pod) { p.Spec.Resources.Requests = cpu("4") },
		"no pod-level":       func(p *corev1.Pod) { p.Spec.Resources = nil },
		"allocated in status": func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: cpu("1")}}
		},
		"actuated in status":   func(p *corev1.Pod) { p.Status.Resources = &corev1.ResourceRequirements{} },
		"pod allocated status": func(p *corev1.Pod) { p.Status.AllocatedResources = cpu("1") },
		"infeasible resize": func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
		},
	} {
		changed := base.DeepCopy()
		change(changed)
		if SameRequests(base, changed) || SameRequests(changed, base) {
			t.Errorf("%s changed: SameRequests is still true", name)
		}
	}
}

func BenchmarkPodRequests(b *testing.B) {
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}},
		InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: cpu("2")}}},
		Overhead:       cpu("100m"),
	}}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "n1"
	b.Run("pending", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			PodRequests(pod)
		}
	})
	b.Run("status-aware", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			statusAware(pod)
		}
	})
	b.Run("same-requests", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			SameRequests(pod, bound)
		}
	})
}
