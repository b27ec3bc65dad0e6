package estimator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// draFramework is a simulation framework over a fake cluster holding objs
// (claims and device classes), its informers synced.
func draFramework(t *testing.T, objs ...runtime.Object) *simulator.Framework {
	t.Helper()
	cfg, err := simulator.DefaultSchedulerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	fw, err := simulator.NewFramework(t.Context(), simulator.FrameworkOptions{Config: cfg, Client: client, Informers: factory})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	for typ, ok := range factory.WaitForCacheSync(t.Context().Done()) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	// The plugin reads claims from a cache that its informer's handler
	// fills after the informer synced.
	fw.SetSnapshot(simulator.NewSnapshot(nil, nil))
	for _, o := range objs {
		claim, ok := o.(*resourcev1.ResourceClaim)
		if !ok {
			continue
		}
		probe := claimPod("probe", claim.Name)
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			st := fw.PreFilter(ctx, probe).PreFilterStatus()
			return st == nil || !strings.Contains(st.Message(), "could not find"), nil
		})
		if err != nil {
			t.Fatalf("claim %s never seen: %v", claim.Name, err)
		}
	}
	return fw
}

const testClass = "gpu.example.com"

func deviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: testClass}}
}

// oneDeviceClaim is a claim in default for one device of the test class.
func oneDeviceClaim(name string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("claim-" + name)}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: testClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}
	return c
}

// claimPod is a 100m pod using claim.
func claimPod(name, claim string) *corev1.Pod {
	p := pod(name, "100m", "")
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

// deviceSlice is node's slice of n devices of the test class's driver.
func deviceSlice(node string, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: testClass, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
	}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

// copiesWithDevices makes new nodes as copies does, each with its own copy
// of the template's slices, as the loop makes them.
func copiesWithDevices(node *corev1.Node, slices []*resourcev1.ResourceSlice) NewNode {
	plain := copies(node)
	return func(i int) (fwk.NodeInfo, []*resourcev1.ResourceSlice, error) {
		info, _, err := plain(i)
		if err != nil {
			return nil, nil, err
		}
		return info, nodetemplate.ResourceSlicesFor(slices, node.Name, info.Node().Name), nil
	}
}

// TestBinpackAllocatesDevices: pods with claims fit template nodes by the
// devices the template's slices publish, a device taken by a placed pod is
// not given to the next, a claim shared by pods is allocated once, and the
// snapshot (its claims and devices too) is as it was afterwards. The checks
// are those of the loop, run before any node with devices exists.
func TestBinpackAllocatesDevices(t *testing.T) {
	ctx := context.Background()
	var objs []runtime.Object
	objs = append(objs, deviceClass(), oneDeviceClaim("shared"))
	for i := range 5 {
		objs = append(objs, oneDeviceClaim(fmt.Sprintf("own-%d", i)))
	}
	for i := range 2 {
		all := oneDeviceClaim(fmt.Sprintf("all-%d", i))
		all.Spec.Devices.Requests[0].Exactly.AllocationMode, all.Spec.Devices.Requests[0].Exactly.Count = resourcev1.DeviceAllocationModeAll, 0
		objs = append(objs, all)
	}
	fw := draFramework(t, objs...)
	node := template(t, "16", "64Gi")
	slices := []*resourcev1.ResourceSlice{deviceSlice(node.Name, 2)}
	info, err := simulator.NewNodeInfo(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		pods            []*corev1.Pod
		limit           int
		wantNodes       int
		wantUnscheduled int
	}{
		{name: "five one-device claims on two-device nodes", pods: ownClaimPods(5), limit: 10, wantNodes: 3},
		{name: "a limit of two nodes leaves one out", pods: ownClaimPods(5), limit: 2, wantNodes: 2, wantUnscheduled: 1},
		{
			name:  "a claim shared by three pods takes one device",
			pods:  append([]*corev1.Pod{claimPod("s-0", "shared"), claimPod("s-1", "shared"), claimPod("s-2", "shared")}, ownClaimPods(1)...),
			limit: 10, wantNodes: 1,
		},
		{
			// allocationMode All takes every matching device of the
			// node it is allocated on: a node per such claim, and
			// none left there for a one-device claim.
			name:  "claims for all devices take a node each",
			pods:  append([]*corev1.Pod{claimPod("all-0", "all-0"), claimPod("all-1", "all-1")}, ownClaimPods(1)...),
			limit: 10, wantNodes: 3,
		},
		{
			name:  "a shared claim's pods follow it to its node",
			pods:  append(ownClaimPods(2), claimPod("s-0", "shared"), claimPod("s-1", "shared")),
			limit: 10, wantNodes: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snapshot := simulator.NewSnapshot(nil, nil)
			fw.SetSnapshot(snapshot)
			stamp := snapshot.DRAStamp()
			var pods []Pod
			checks := map[string]*simulator.PodCheck{}
			for g, p := range tc.pods {
				claim := *p.Spec.ResourceClaims[0].ResourceClaimName
				if checks[claim] == nil {
					checks[claim] = fw.PreFilter(ctx, p)
				}
				ep, err := NewPod(p, checks[claim], g)
				if err != nil {
					t.Fatal(err)
				}
				pods = append(pods, ep)
			}
			res, err := Binpack(ctx, snapshot, pods, copiesWithDevices(node, slices), info, tc.limit, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := []int{res.NodeCount, len(res.Scheduled), len(res.Unscheduled)}
			want := []int{tc.wantNodes, len(tc.pods) - tc.wantUnscheduled, tc.wantUnscheduled}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[nodes scheduled unscheduled] (-want +got):\n%s", diff)
			}
			if snapshot.Len() != 0 || snapshot.DRAStamp() != stamp {
				t.Errorf("after the estimate: %d nodes, DRA stamp %d (was %d)", snapshot.Len(), snapshot.DRAStamp(), stamp)
			}
			// The same estimate again, from the reverted snapshot and
			// the same checks, comes out the same.
			again, err := Binpack(ctx, snapshot, pods, copiesWithDevices(node, slices), info, tc.limit, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, []int{again.NodeCount, len(again.Scheduled), len(again.Unscheduled)}); diff != "" {
				t.Errorf("a second estimate differs (-first +second):\n%s", diff)
			}
		})
	}
}

// ownClaimPods are n pods, each with its own one-device claim own-<i>.
func ownClaimPods(n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, claimPod(fmt.Sprintf("own-%d", i), fmt.Sprintf("own-%d", i)))
	}
	return out
}
