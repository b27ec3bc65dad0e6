package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
)

// Devices that pods get through Dynamic Resource Allocation count in the
// ElasticQuotaTree: the real scheduler allocates the claims on node-local
// ResourceSlices of kwok nodes, and the CapacityScheduling plugin charges
// them to the leaf. The oracle counts the same devices from the claims'
// allocation results.

// draWorld is one test's device class (named after the test, as classes are
// cluster-wide) served by a driver of the same name, and a kwok node whose
// ResourceSlice publishes devices of that driver.
type draWorld struct {
	class    string
	extended corev1.ResourceName
	node     string
}

// devicesResource is the class's ResourceQuota name.
func (w draWorld) devicesResource() string {
	return w.class + ".deviceclass.resource.k8s.io/devices"
}

// newDRAWorld creates the class (serving extended, unless it is empty) and a
// node publishing devices devices of it.
func newDRAWorld(t *testing.T, ctx context.Context, suffix string, devices int, extended corev1.ResourceName) draWorld {
	t.Helper()
	w := draWorld{class: "gpu-" + suffix + ".example.com", extended: extended, node: "dra-" + suffix}
	createNodes(t, ctx, localcluster.NodeSpec{Name: w.node, Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi")}})
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: w.class}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", w.class)}}},
	}}
	if extended != "" {
		class.Spec.ExtendedResourceName = ptr.To(string(extended))
	}
	if _, err := cluster.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.ResourceV1().DeviceClasses().Delete(context.Background(), w.class, metav1.DeleteOptions{})
	})
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: w.node + "-" + suffix}, Spec: resourcev1.ResourceSliceSpec{
		Driver: w.class, NodeName: ptr.To(w.node),
		Pool: resourcev1.ResourcePool{Name: w.node, Generation: 1, ResourceSliceCount: 1},
	}}
	for i := range devices {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	if _, err := cluster.Client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})
	return w
}

// createClaim creates a claim in namespace for count devices of the world's
// class.
func (w draWorld) createClaim(t *testing.T, ctx context.Context, namespace, name string, count int64) {
	t.Helper()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	claim.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: w.class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}}
	if _, err := cluster.Client.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createDRAPod creates a pod of namespace using claim (none when empty) and
// requesting requests.
func createDRAPod(t *testing.T, ctx context.Context, namespace, name, claim string, requests corev1.ResourceList) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
			Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}},
	}}
	if claim != "" {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	if _, err := cluster.Client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var oneCPU = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}

// applyDeviceTree puts in force a tree whose leaf team lists namespace with
// max maxes (YAML flow mapping entries).
func applyDeviceTree(t *testing.T, ctx context.Context, namespace, maxes string) {
	t.Helper()
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 32}
    max: {cpu: 32}
    children:
    - {name: team, namespaces: [%s], max: {cpu: 32, %s}}
`, namespace, maxes)))
}

// TestDRATreeLeafDeviceMax: a leaf with a device max of 2 runs two one-device
// claims' pods; the third waits with an event naming the leaf and the
// resource. A namespace outside the tree is not limited.
func TestDRATreeLeafDeviceMax(t *testing.T) {
	ctx := testContext(t)
	team, outside := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	w := newDRAWorld(t, ctx, "leafmax", 8, "")
	applyDeviceTree(t, ctx, team, fmt.Sprintf("%q: 2", w.devicesResource()))
	for i := 1; i <= 3; i++ {
		for _, ns := range []string{team, outside} {
			name := fmt.Sprintf("gpu-%d", i)
			w.createClaim(t, ctx, ns, name, 1)
			createDRAPod(t, ctx, ns, name, name, oneCPU)
		}
	}
	settle(t, ctx, "two of the team's pods and all three outside the tree running", wantRunning([]string{team, outside}, []int{2, 3}))
	assertPendingPodEvent(t, ctx, team, fmt.Sprintf(`exceeded elastic quota "team": %s used 2, requested 1, max 2`, w.devicesResource()))

	// kubectl quota explain judges the waiting pod's claim as the scheduler
	// does: refused on the device dimension, not admitted on its cpu alone.
	pending := pendingPods(t, ctx, team)
	if len(pending) != 1 {
		t.Fatalf("pending pods in %s: %v, want one", team, pending)
	}
	var e struct {
		ElasticQuota struct {
			Leaf     string `json:"leaf"`
			Admitted bool   `json:"admitted"`
			Message  string `json:"message"`
		} `json:"elasticQuota"`
	}
	out := mustKubectlQuota(t, ctx, "explain", "pod", pending[0], "-n", team, "-o", "json")
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("kubectl quota explain -o json: %v\n%s", err, out)
	}
	if e.ElasticQuota.Leaf != "team" || e.ElasticQuota.Admitted || !strings.Contains(e.ElasticQuota.Message, w.devicesResource()) {
		t.Errorf("kubectl quota explain on the waiting pod: want refused by team on %s, got %+v", w.devicesResource(), e.ElasticQuota)
	}
}

// TestDRATreeExtendedResourceAndClaimShareALimit: the class serves an
// extended resource; a claim and a pod asking that extended resource count in
// one limit, whichever the leaf's max names.
func TestDRATreeExtendedResourceAndClaimShareALimit(t *testing.T) {
	ctx := testContext(t)
	team := createNamespace(t, ctx, "")
	extended := corev1.ResourceName("example.com/gpu-ext")
	w := newDRAWorld(t, ctx, "ext", 8, extended)
	applyDeviceTree(t, ctx, team, fmt.Sprintf("%q: 2", extended))
	w.createClaim(t, ctx, team, "two", 2)
	createDRAPod(t, ctx, team, "claimer", "two", oneCPU)
	settle(t, ctx, "the claim's pod running", wantRunning([]string{team}, []int{1}))
	asking := oneCPU.DeepCopy()
	asking[extended] = resource.MustParse("1")
	createDRAPod(t, ctx, team, "asker", "", asking)
	assertPendingPodEvent(t, ctx, team, fmt.Sprintf(`exceeded elastic quota "team": %s used 2, requested 1, max 2`, extended))
	settle(t, ctx, "the pod asking the extended resource waiting", wantRunning([]string{team}, []int{1}))
}

// TestDRATreeSharedClaimChargedOnce: a claim of 2 devices used by 3 pods of a
// leaf with a device max of 2 is charged once: all three run, and a claim of
// one more device waits.
func TestDRATreeSharedClaimChargedOnce(t *testing.T) {
	ctx := testContext(t)
	team := createNamespace(t, ctx, "")
	w := newDRAWorld(t, ctx, "shared", 8, "")
	applyDeviceTree(t, ctx, team, fmt.Sprintf("%q: 2", w.devicesResource()))
	w.createClaim(t, ctx, team, "shared", 2)
	for i := 1; i <= 3; i++ {
		createDRAPod(t, ctx, team, fmt.Sprintf("user-%d", i), "shared", oneCPU)
	}
	settle(t, ctx, "the three users of the shared claim running", wantRunning([]string{team}, []int{3}))
	w.createClaim(t, ctx, team, "more", 1)
	createDRAPod(t, ctx, team, "more", "more", oneCPU)
	assertPendingPodEvent(t, ctx, team, fmt.Sprintf(`exceeded elastic quota "team": %s used 2, requested 1, max 2`, w.devicesResource()))
	claim, err := cluster.Client.ResourceV1().ResourceClaims(team).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(claim.Status.ReservedFor); got != 3 || claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 2 {
		var results []string
		if claim.Status.Allocation != nil {
			for _, r := range claim.Status.Allocation.Devices.Results {
				results = append(results, r.Device)
			}
		}
		t.Errorf("the shared claim is reserved for %d pods with devices [%s], want 3 pods and 2 devices", got, strings.Join(results, ", "))
	}
}

// watchClaimsAndClasses feeds the oracle the ResourceClaims, whose
// allocation results hold devices, and the DeviceClasses, which name the
// extended resource their devices also count under; the factory is still to
// be started.
func (c *invariantChecker) watchClaimsAndClasses(t *testing.T, body context.Context, factory informers.SharedInformerFactory) []cache.InformerSynced {
	t.Helper()
	feed := func(informer cache.SharedIndexInformer, set func(any), del func(any)) cache.InformerSynced {
		if _, err := informer.AddEventHandler(whileRunning{body, cache.ResourceEventHandlerFuncs{
			AddFunc: set, UpdateFunc: func(_, obj any) { set(obj) }, DeleteFunc: func(obj any) { del(finalState(obj)) },
		}}); err != nil {
			t.Fatal(err)
		}
		return informer.HasSynced
	}
	claims := feed(factory.Resource().V1().ResourceClaims().Informer(),
		func(obj any) {
			if claim, ok := obj.(*resourcev1.ResourceClaim); ok {
				c.SetResourceClaim(claim)
			}
		},
		func(obj any) {
			if claim, ok := obj.(*resourcev1.ResourceClaim); ok {
				c.DeleteResourceClaim(claim.Namespace, claim.Name)
			}
		})
	classes := feed(factory.Resource().V1().DeviceClasses().Informer(),
		func(obj any) {
			if class, ok := obj.(*resourcev1.DeviceClass); ok {
				c.SetDeviceClass(class)
			}
		},
		func(obj any) {
			if class, ok := obj.(*resourcev1.DeviceClass); ok {
				c.DeleteDeviceClass(class.Name)
			}
		})
	return []cache.InformerSynced{claims, classes}
}
