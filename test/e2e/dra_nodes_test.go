package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The DRA tests' kwok groups: every node has two devices of the
// gpu.example.com driver, which localcluster's kwok DRA driver publishes.
const draGPUGroup = `
nodeGroups:
- name: e2e-kwok-gpu
  minSize: 0
  maxSize: 6
  capacity: {cpu: "16", memory: 64Gi}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      model: {string: kwok-a100}
    capacity:
      memory: 40Gi
`

// createDeviceClass creates a DeviceClass selecting driver's devices with a
// CEL expression; it is deleted when the test ends.
func createDeviceClass(t *testing.T, ctx context.Context, name, driver string) {
	t.Helper()
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	if _, err := cluster.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating device class %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createClaimTemplate creates a ResourceClaimTemplate asking for one device
// of class.
func createClaimTemplate(t *testing.T, ctx context.Context, ns, name, class string) {
	t.Helper()
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "device", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}},
		}}},
	}
	if _, err := cluster.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating resource claim template %s/%s: %v", ns, name, err)
	}
}

// createClaimPods creates n bare pods, each with a claim of its own from the
// template.
func createClaimPods(t *testing.T, ctx context.Context, ns, prefix string, n int, template string) {
	t.Helper()
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns, Labels: map[string]string{"app": prefix}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				ResourceClaims:                []corev1.PodResourceClaim{{Name: "device", ResourceClaimTemplateName: ptr.To(template)}},
				Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
						Claims:   []corev1.ResourceClaim{{Name: "device"}},
					},
				}},
			},
		}
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// claimPlacement reads, from the API, where the pods of ns run and which
// devices their claims were allocated: pods bound per node, devices allocated
// per node (from the allocation results: a node-local pool is named after its
// node), and an error if a device is allocated twice or a bound pod's claim is
// not allocated on the pod's node.
func claimPlacement(ctx context.Context, ns string) (podsPerNode, devicesPerNode map[string]int, err error) {
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	claims, err := cluster.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*resourcev1.ResourceClaim{}
	for i := range claims.Items {
		byName[claims.Items[i].Name] = &claims.Items[i]
	}
	podsPerNode, devicesPerNode = map[string]int{}, map[string]int{}
	seen := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		podsPerNode[p.Spec.NodeName]++
		for _, st := range p.Status.ResourceClaimStatuses {
			c := byName[ptr.Deref(st.ResourceClaimName, "")]
			if c == nil || c.Status.Allocation == nil {
				return nil, nil, fmt.Errorf("pod %s on %s: claim %q not allocated", p.Name, p.Spec.NodeName, ptr.Deref(st.ResourceClaimName, ""))
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				if r.Pool != p.Spec.NodeName {
					return nil, nil, fmt.Errorf("pod %s on %s: claim %s got device %s of pool %s", p.Name, p.Spec.NodeName, c.Name, r.Device, r.Pool)
				}
				id := r.Driver + "/" + r.Pool + "/" + r.Device
				if other, dup := seen[id]; dup {
					return nil, nil, fmt.Errorf("device %s allocated to claims %s and %s", id, other, c.Name)
				}
				seen[id] = c.Name
				devicesPerNode[p.Spec.NodeName]++
			}
		}
	}
	return podsPerNode, devicesPerNode, nil
}

// groupSlices are the ResourceSlices published for the nodes of group, by
// node name: the group's nodes are named after it.
func groupSlices(ctx context.Context, group string) (map[string][]resourcev1.ResourceSlice, error) {
	slices, err := cluster.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]resourcev1.ResourceSlice{}
	for _, s := range slices.Items {
		if node := ptr.Deref(s.Spec.NodeName, ""); strings.HasPrefix(node, group+"-") {
			out[node] = append(out[node], s)
		}
	}
	return out, nil
}

func sortedCounts(m map[string]int) []int {
	out := make([]int, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// TestDRANodesPublishDevices: a kwok group declaring two devices per node.
// Its nodes get a ResourceSlice each, a node-local pool of two devices; the
// real scheduler allocates one-device claims on them, two pods per node, and
// a fifth pod waits for a device. The slices go away with their node.
func TestDRANodesPublishDevices(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	cloud := startKwokCloud(t, ctx, draGPUGroup)
	createDeviceClass(t, ctx, "e2e-dra-nodes-gpu", "gpu.example.com")
	createClaimTemplate(t, ctx, ns, "one-gpu", "e2e-dra-nodes-gpu")

	group := cloud.provider.NodeGroups()[0]
	if err := group.IncreaseSize(2); err != nil {
		t.Fatal(err)
	}
	var nodeNames []string
	waitFor(t, ctx, "each node's slice of two devices", func(ctx context.Context) error {
		slices, err := groupSlices(ctx, "e2e-kwok-gpu")
		if err != nil {
			return err
		}
		if len(slices) != 2 {
			return fmt.Errorf("slices of %d nodes: %v", len(slices), slices)
		}
		nodeNames = nodeNames[:0]
		for node, ss := range slices {
			nodeNames = append(nodeNames, node)
			if len(ss) != 1 {
				return fmt.Errorf("node %s has %d slices", node, len(ss))
			}
			s := ss[0]
			got := fmt.Sprintf("driver=%s pool=%s/%d of %d devices=%d owner=%v", s.Spec.Driver, s.Spec.Pool.Name, s.Spec.Pool.Generation,
				s.Spec.Pool.ResourceSliceCount, len(s.Spec.Devices), len(s.OwnerReferences) == 1 && s.OwnerReferences[0].Name == node)
			want := fmt.Sprintf("driver=gpu.example.com pool=%s/1 of 1 devices=2 owner=true", node)
			if got != want {
				return fmt.Errorf("node %s: slice %s, want %s", node, got, want)
			}
			if m := s.Spec.Devices[0].Attributes["model"].StringValue; ptr.Deref(m, "") != "kwok-a100" {
				return fmt.Errorf("node %s: device model %v", node, m)
			}
		}
		return nil
	})

	createClaimPods(t, ctx, ns, "gpu", 5, "one-gpu")
	waitFor(t, ctx, "four pods bound with their claims, two per node", func(ctx context.Context) error {
		pods, devices, err := claimPlacement(ctx, ns)
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]int{2, 2}, sortedCounts(pods)); diff != "" {
			return fmt.Errorf("pods per node (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{2, 2}, sortedCounts(devices)); diff != "" {
			return fmt.Errorf("devices per node (-want +got):\n%s", diff)
		}
		return nil
	})
	waitUnschedulable(t, ctx, ns, 1)

	nodes, err := group.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	gone, err := cluster.Client.CoreV1().Nodes().Get(ctx, nodes[0].Id[len("kwok://e2e-kwok-gpu/"):], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.DeleteNodes([]*corev1.Node{gone}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the deleted node's slice gone, the other's kept", func(ctx context.Context) error {
		if _, err := cluster.Client.CoreV1().Nodes().Get(ctx, gone.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s still there (%v)", gone.Name, err)
		}
		slices, err := groupSlices(ctx, "e2e-kwok-gpu")
		if err != nil {
			return err
		}
		if _, ok := slices[gone.Name]; ok || len(slices) != 1 {
			return fmt.Errorf("slices by node: %v", slices)
		}
		return nil
	})
}
