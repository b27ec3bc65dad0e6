package oracle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const gpus = "gpu.example.com.deviceclass.resource.k8s.io/devices"

// gpuTeams: leaf a may hold 2 devices of class gpu.example.com, leaf b 2
// example.com/gpu, the name that class serves.
func gpuTeams() *Oracle {
	o := New()
	o.SetTree(testTree("t", 0, 1, judgedValid, quotaNode("root", list("cpu=8"), list("cpu=8"), nil,
		quotaNode("a", nil, list(gpus+"=2"), list("ns-a")),
		quotaNode("b", nil, list("example.com/gpu=2"), list("ns-b")))))
	o.SetDeviceClass(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}})
	return o
}

// allocatedClaim holds devices devices of class gpu.example.com.
func allocatedClaim(ns, name string, devices int) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: int64(devices)}}}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "r"})
	}
	return c
}

func usingClaim(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(claim)})
	return p
}

func TestTreeDevices(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(o *Oracle)
		want  []string
	}{{
		name: "a third device over the leaf's device max",
		steps: func(o *Oracle) {
			o.SetResourceClaim(allocatedClaim("ns-a", "two", 2))
			o.SetPod(usingClaim(testPod("ns-a", "p1", "n1", "cpu=1"), "two"), false)
			o.SetResourceClaim(allocatedClaim("ns-a", "one", 1))
			o.SetPod(usingClaim(testPod("ns-a", "p2", "n1", "cpu=1"), "one"), false)
		},
		want: []string{`quota node "a" of kube-system/t@1: bound pods request ` + gpus + ` 3, over its max 2, once pod ns-a/p2 was bound`},
	}, {
		name: "a claim shared by three pods counts once",
		steps: func(o *Oracle) {
			o.SetResourceClaim(allocatedClaim("ns-a", "shared", 2))
			for _, name := range []string{"s1", "s2", "s3"} {
				o.SetPod(usingClaim(testPod("ns-a", name, "n1", "cpu=1"), "shared"), false)
			}
		},
	}, {
		name: "an allocation seen after the binding is judged when it is seen",
		steps: func(o *Oracle) {
			o.SetResourceClaim(allocatedClaim("ns-a", "two", 2))
			o.SetPod(usingClaim(testPod("ns-a", "p1", "n1", "cpu=1"), "two"), false)
			pending := allocatedClaim("ns-a", "late", 1)
			pending.Status.Allocation = nil
			o.SetResourceClaim(pending)
			o.SetPod(usingClaim(testPod("ns-a", "p2", "n1", "cpu=1"), "late"), false)
			o.SetResourceClaim(allocatedClaim("ns-a", "late", 1))
		},
		want: []string{`quota node "a" of kube-system/t@1: bound pods request ` + gpus + ` 3, over its max 2, once pod ns-a/p2 was bound (its claim ns-a/late allocated)`},
	}, {
		name: "a claim and a pod asking the class's extended resource share one limit",
		steps: func(o *Oracle) {
			o.SetResourceClaim(allocatedClaim("ns-b", "two", 2))
			o.SetPod(usingClaim(testPod("ns-b", "claimer", "n1", "cpu=1"), "two"), false)
			o.SetPod(testPod("ns-b", "asker", "n1", "example.com/gpu=1"), false)
		},
		want: []string{`quota node "b" of kube-system/t@1: bound pods request example.com/gpu 3, over its max 2, once pod ns-b/asker was bound`},
	}, {
		name: "a pod asking the extended resource fills the class's device max",
		steps: func(o *Oracle) {
			o.SetPod(testPod("ns-a", "asker", "n1", "example.com/gpu=2"), false)
			o.SetResourceClaim(allocatedClaim("ns-a", "one", 1))
			o.SetPod(usingClaim(testPod("ns-a", "claimer", "n1", "cpu=1"), "one"), false)
		},
		want: []string{`quota node "a" of kube-system/t@1: bound pods request ` + gpus + ` 3, over its max 2, once pod ns-a/claimer was bound`},
	}, {
		name: "a namespace outside the tree is not limited",
		steps: func(o *Oracle) {
			o.SetResourceClaim(allocatedClaim("elsewhere", "many", 5))
			o.SetPod(usingClaim(testPod("elsewhere", "p", "n1", "cpu=1"), "many"), false)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			o := gpuTeams()
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
