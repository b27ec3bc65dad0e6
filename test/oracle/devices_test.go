package oracle

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testSlice(node, driver string, generation int64, devices int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, driver, generation)}}
	s.Spec.Driver, s.Spec.NodeName = driver, ptr.To(node)
	s.Spec.Pool = resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev-%d", i)})
	}
	return s
}

func allocatedGPUClaim(name, class, driver string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: "p", Device: "dev-0"}},
	}}
	return c
}

func TestCapacityQuotaDevices(t *testing.T) {
	const limit = "gpu.example.com.deviceclass.resource.k8s.io/devices=4"
	for _, tc := range []struct {
		name  string
		steps func(o *Oracle)
		want  []string
	}{
		{
			name: "devices of the drivers a class's allocations show, newest generation only",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, limit))
				o.SetResourceClaim(allocatedGPUClaim("c", "gpu.example.com", "gpu.example.com"))
				for i, n := range []string{"n1", "n2", "n3"} {
					o.SetResourceSlice(testSlice(n, "gpu.example.com", 1, 3)) // replaced below
					o.SetResourceSlice(testSlice(n, "gpu.example.com", 2, 2))
					o.SetResourceSlice(testSlice(n, "nic.example.com", 1, 8)) // another class's driver
					if i < 2 {
						o.SetNode(testNode(n, 5+i, nil, "cpu=4"))
					}
				}
				o.SetNode(testNode("n3", 7, nil, "cpu=4"))
			},
			want: []string{"CapacityQuota q: 3 node(s) registered since its last change (10:00:00) have gpu.example.com.deviceclass.resource.k8s.io/devices 6, over its limit 4; on node n3 registered or changed"},
		},
		{
			name: "two nodes of two devices fit a limit of four",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, limit))
				for i, n := range []string{"n1", "n2"} {
					o.SetResourceSlice(testSlice(n, "gpu.example.com", 1, 2))
					o.SetNode(testNode(n, 5+i, nil, "cpu=4"))
				}
				o.SetResourceClaim(allocatedGPUClaim("c", "gpu.example.com", "gpu.example.com"))
			},
		},
		{
			name: "a class no claim was allocated from counts nothing yet, and is judged once one is",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, limit))
				for i, n := range []string{"n1", "n2", "n3"} {
					o.SetResourceSlice(testSlice(n, "gpu.example.com", 1, 2))
					o.SetNode(testNode(n, 5+i, nil, "cpu=4"))
				}
				o.SetResourceClaim(allocatedGPUClaim("other", "other.example.com", "gpu.example.com"))
				o.SetResourceClaim(allocatedGPUClaim("c", "gpu.example.com", "gpu.example.com"))
			},
			want: []string{"CapacityQuota q: 3 node(s) registered since its last change (10:00:00) have gpu.example.com.deviceclass.resource.k8s.io/devices 6, over its limit 4; on ResourceClaim ns/c allocated"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
