package capacityscheduling

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

const gpuDevices corev1.ResourceName = "gpu.example.com.deviceclass.resource.k8s.io/devices"

// gpuTree: team-a may use 2 devices of class gpu.example.com, or 2
// example.com/gpu, the name that class serves; team-b is unlimited.
const gpuTree = `
spec:
  root:
    name: root
    min: {cpu: 100}
    max: {cpu: 100}
    children:
    - {name: team-a, namespaces: [team-a], max: {cpu: 100, "gpu.example.com.deviceclass.resource.k8s.io/devices": 2}}
    - {name: team-x, namespaces: [team-x], max: {cpu: 100, "example.com/gpu": 2}}
    - {name: team-b, namespaces: [team-b], max: {cpu: 100}}
`

func gpuClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
}

// gpuClaim asks for count devices of class; allocated lists the requests of
// its allocation results, none when it is not allocated.
func gpuClaim(namespace, name, class string, count int64, allocated ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("claim-" + name)}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}
	if allocated != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for i, r := range allocated {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: r, Driver: "gpu.example.com", Pool: "n1", Device: "gpu-" + string(rune('0'+i))})
		}
	}
	return c
}

// withClaim adds a claim named directly to pod.
func withClaim(pod *corev1.Pod, claim string) *corev1.Pod {
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: claim, ResourceClaimName: ptr.To(claim)})
	return pod
}

// withTemplateClaim adds a claim generated from a template for pod, named
// generated, which the claim must be owned by.
func withTemplateClaim(pod *corev1.Pod, generated string) *corev1.Pod {
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")})
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: ptr.To(generated)})
	return pod
}

func gpuQuantity(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

func ownedBy(claim *resourceapi.ResourceClaim, pod *corev1.Pod) *resourceapi.ResourceClaim {
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	return claim
}

func (h *harness) used(node string, name corev1.ResourceName) string {
	h.plugin.cache.mu.Lock()
	defer h.plugin.cache.mu.Unlock()
	used, _ := h.plugin.cache.tree.Used(node)
	q := used[name]
	return q.String()
}

// waitUsed polls until the quota node uses want of name: informer handlers
// deliver claims and pods asynchronously.
func (h *harness) waitUsed(node string, name corev1.ResourceName, want string) {
	h.t.Helper()
	var got string
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		got = h.used(node, name)
		return got == want, nil
	}); err != nil {
		h.t.Fatalf("%s uses %s %s, want %s", node, got, name, want)
	}
}

func (h *harness) preFilterCode(pod *corev1.Pod) (fwk.Code, string) {
	_, status := h.plugin.PreFilter(h.ctx, framework.NewCycleState(), pod, nil)
	return status.Code(), status.Message()
}

func TestClaimsChargeTheirDevices(t *testing.T) {
	bound := withTemplateClaim(testPod("bound", "team-a", "1", "n1", low, 0), "bound-gpu")
	named := withClaim(testPod("named", "team-a", "1", "n1", low, 0), "named-gpu")
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: []*corev1.Pod{bound, named},
		dra: []runtime.Object{gpuClass(), ownedBy(gpuClaim("team-a", "bound-gpu", "gpu.example.com", 1, "gpu"), bound),
			gpuClaim("team-a", "named-gpu", "gpu.example.com", 1, "gpu"),
			gpuClaim("team-a", "third", "gpu.example.com", 1), gpuClaim("team-b", "free", "gpu.example.com", 5)}})
	h.waitUsed("team-a", gpuDevices, "2")

	code, msg := h.preFilterCode(withClaim(testPod("third", "team-a", "1", "", high, 0), "third"))
	if code != fwk.UnschedulableAndUnresolvable || !strings.Contains(msg, `exceeded elastic quota "team-a": `+string(gpuDevices)+` used 2, requested 1, max 2`) {
		t.Errorf("the third claim's pod: PreFilter = %v %q, want refused naming team-a and %s", code, msg, gpuDevices)
	}
	if code, msg := h.preFilterCode(withClaim(testPod("free", "team-b", "1", "", high, 0), "free")); code != fwk.Skip {
		t.Errorf("a leaf with no device max: PreFilter = %v %q, want admitted", code, msg)
	}
	if code, msg := h.preFilterCode(withClaim(testPod("outside", "default", "1", "", high, 0), "x")); code != fwk.Skip {
		t.Errorf("a namespace outside the tree: PreFilter = %v %q, want not governed", code, msg)
	}
}

// The extended resource a class serves and the class's devices are one
// limit: a claim fills example.com/gpu, a pod asking example.com/gpu fills
// the class's devices.
func TestExtendedResourceAndClaimCountInOneLimit(t *testing.T) {
	withClaimPod := withClaim(testPod("claimer", "team-x", "1", "n1", low, 0), "two")
	asking := testPod("asker", "team-a", "1", "n1", low, 0)
	asking.Spec.Containers[0].Resources.Requests["example.com/gpu"] = gpuQuantity(2)
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: []*corev1.Pod{withClaimPod, asking},
		dra: []runtime.Object{gpuClass(), gpuClaim("team-x", "two", "gpu.example.com", 2, "gpu", "gpu"),
			gpuClaim("team-a", "one", "gpu.example.com", 1), gpuClaim("team-x", "one", "gpu.example.com", 1)}})
	h.waitUsed("team-x", "example.com/gpu", "2")
	h.waitUsed("team-a", gpuDevices, "2")

	if code, msg := h.preFilterCode(withClaim(testPod("p", "team-a", "1", "", high, 0), "one")); code != fwk.UnschedulableAndUnresolvable || !strings.Contains(msg, string(gpuDevices)) {
		t.Errorf("a claim after a pod asking example.com/gpu: PreFilter = %v %q, want refused on %s", code, msg, gpuDevices)
	}
	p := testPod("q", "team-x", "1", "", high, 0)
	p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = gpuQuantity(1)
	if code, msg := h.preFilterCode(p); code != fwk.UnschedulableAndUnresolvable || !strings.Contains(msg, "example.com/gpu used 2, requested 1, max 2") {
		t.Errorf("a pod asking example.com/gpu after a claim: PreFilter = %v %q, want refused on example.com/gpu", code, msg)
	}
}

// A claim three pods share is charged once, while any of them is charged.
func TestSharedClaimChargedOnce(t *testing.T) {
	var pods []*corev1.Pod
	for _, name := range []string{"s1", "s2"} {
		pods = append(pods, withClaim(testPod(name, "team-a", "1", "n1", low, 0), "shared"))
	}
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: pods,
		dra: []runtime.Object{gpuClass(), gpuClaim("team-a", "shared", "gpu.example.com", 2, "gpu", "gpu"), gpuClaim("team-a", "own", "gpu.example.com", 1)}})
	h.waitUsed("team-a", gpuDevices, "2")

	third := withClaim(testPod("s3", "team-a", "1", "", high, 0), "shared")
	state := framework.NewCycleState()
	if _, status := h.plugin.PreFilter(h.ctx, state, third, nil); status.Code() != fwk.Skip {
		t.Fatalf("a third user of the charged claim: PreFilter = %v, want admitted", status)
	}
	if status := h.reserveAssumed(state, third, "n1"); !status.IsSuccess() {
		t.Fatalf("Reserve = %v", status)
	}
	if got := h.used("team-a", gpuDevices); got != "2" {
		t.Errorf("after the third user's Reserve, team-a uses %s devices, want 2", got)
	}
	if code, msg := h.preFilterCode(withClaim(testPod("other", "team-a", "1", "", high, 0), "own")); code != fwk.UnschedulableAndUnresolvable {
		t.Errorf("another claim while the shared one fills the leaf: PreFilter = %v %q, want refused", code, msg)
	}

	h.unreserveAssumed(state, third, "n1")
	for _, p := range pods[:1] {
		if err := h.client.CoreV1().Pods(p.Namespace).Delete(h.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One user is left: the claim stays charged.
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		return !h.plugin.cache.tree.Tracks("s1"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.used("team-a", gpuDevices); got != "2" {
		t.Errorf("with one user left, team-a uses %s devices, want 2", got)
	}
	if err := h.client.CoreV1().Pods("team-a").Delete(h.ctx, "s2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitUsed("team-a", gpuDevices, "0")
}

// Before allocation the request counts; once allocated, the result does:
// an All request is charged every device it got.
func TestAllocationResultIsTheTruth(t *testing.T) {
	pod := withTemplateClaim(testPod("all", "team-b", "1", "n1", low, 0), "all-gpu")
	claim := ownedBy(gpuClaim("team-b", "all-gpu", "gpu.example.com", 0), pod)
	claim.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: []*corev1.Pod{pod},
		dra: []runtime.Object{gpuClass(), claim}})
	h.waitUsed("team-b", "cpu", "1")
	if got := h.used("team-b", gpuDevices); got != "0" {
		t.Errorf("an unallocated All request charges %s devices, want 0 until it is sized", got)
	}
	allocated := claim.DeepCopy()
	allocated.Status.Allocation = gpuClaim("", "", "", 0, "gpu", "gpu", "gpu").Status.Allocation
	if _, err := h.client.ResourceV1().ResourceClaims("team-b").UpdateStatus(h.ctx, allocated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitUsed("team-b", gpuDevices, "3")
	h.waitUsed("team-b", "example.com/gpu", "3")
}

// A claim whose DeviceClass is gone: the pending pod is refused with the
// reason; a running pod's devices count under the class's name only.
func TestClaimOfAGoneClass(t *testing.T) {
	running := withClaim(testPod("running", "team-a", "1", "n1", low, 0), "orphan")
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: []*corev1.Pod{running},
		dra: []runtime.Object{gpuClaim("team-a", "orphan", "gpu.example.com", 1, "gpu"), gpuClaim("team-a", "pending", "gpu.example.com", 1)}})
	h.waitUsed("team-a", gpuDevices, "1")
	if got := h.used("team-x", "example.com/gpu"); got != "0" {
		t.Errorf("team-x uses %s example.com/gpu, want 0", got)
	}
	code, msg := h.preFilterCode(withClaim(testPod("p", "team-a", "1", "", high, 0), "pending"))
	if code != fwk.UnschedulableAndUnresolvable || !strings.Contains(msg, `DeviceClass "gpu.example.com" does not exist`) {
		t.Errorf("PreFilter = %v %q, want refused naming the missing DeviceClass", code, msg)
	}
}
