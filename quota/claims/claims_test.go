package claims

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	gpu      = "gpu.example.com.deviceclass.resource.k8s.io/devices"
	fpga     = "fpga.example.com.deviceclass.resource.k8s.io/devices"
	extended = "example.com/gpu"
)

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func class(name string, extendedName string, created int) *resourceapi.DeviceClass {
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))}}
	if extendedName != "" {
		dc.Spec.ExtendedResourceName = ptr.To(extendedName)
	}
	return dc
}

func exact(name, class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

func all(name, class string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeAll}}
}

func claim(name string, owner types.UID, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)}}
	if owner != "" {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: owner, Controller: ptr.To(true)}}
	}
	c.Spec.Devices.Requests = requests
	return c
}

func allocated(c *resourceapi.ResourceClaim, requests ...string) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for i, r := range requests {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: r, Driver: "d", Pool: "node-1", Device: "dev-" + string(rune('a'+i))})
	}
	return c
}

type podOpt func(*corev1.Pod)

func named(podClaim, claimName string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimName: ptr.To(claimName)})
	}
}

// templated names a template claim; generated is the claim the controller
// made for it, "" while it has made none, "-" when it recorded none needed.
func templated(podClaim, generated string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimTemplateName: ptr.To("tmpl")})
		switch generated {
		case "":
		case "-":
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaim})
		default:
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: ptr.To(generated)})
		}
	}
}

func requesting(l corev1.ResourceList) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = l }
}

func pod(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p", UID: "pod-uid"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: list("cpu", "1")}}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func lookup(classes []*resourceapi.DeviceClass, claims ...*resourceapi.ResourceClaim) Lookup {
	byName := map[string]*resourceapi.ResourceClaim{}
	for _, c := range claims {
		byName[c.Namespace+"/"+c.Name] = c
	}
	return Listed{Claims: func(ns, name string) *resourceapi.ResourceClaim { return byName[ns+"/"+name] }, Classes: NewClasses(classes)}
}

func TestPodCharge(t *testing.T) {
	classes := []*resourceapi.DeviceClass{class("gpu.example.com", extended, 1), class("fpga.example.com", "", 1)}
	firstAvailable := resourceapi.DeviceRequest{Name: "any", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "small", DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3},
		{Name: "other", DeviceClassName: "fpga.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
	}}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		claims  []*resourceapi.ResourceClaim
		want    Charge
		wantErr string
	}{{
		name: "no claims, no extended resource: the pod's requests",
		pod:  pod(),
		want: Charge{Own: list("cpu", "1")},
	}, {
		name:   "a named claim is shared, under the class and its extended resource name",
		pod:    pod(named("g", "shared")),
		claims: []*resourceapi.ResourceClaim{claim("shared", "", exact("r", "gpu.example.com", 2))},
		want:   Charge{Own: list("cpu", "1"), Shared: []Shared{{Key: "resourceclaim/uid-shared", Claim: "team/shared", Requests: list(gpu, "2", extended, "2")}}},
	}, {
		name:   "a claim from a template is the pod's own",
		pod:    pod(templated("g", "p-g-x")),
		claims: []*resourceapi.ResourceClaim{claim("p-g-x", "pod-uid", exact("r", "fpga.example.com", 1))},
		want:   Charge{Own: list("cpu", "1", fpga, "1")},
	}, {
		name:    "a template claim not created yet",
		pod:     pod(templated("g", "")),
		want:    Charge{Own: list("cpu", "1")},
		wantErr: `pod team/p: ResourceClaim does not exist: the claim "g" from template "tmpl" is not created yet`,
	}, {
		name: "a template claim the controller found unneeded",
		pod:  pod(templated("g", "-")),
		want: Charge{Own: list("cpu", "1")},
	}, {
		name:    "a generated claim of another pod of the same name",
		pod:     pod(templated("g", "p-g-x")),
		claims:  []*resourceapi.ResourceClaim{claim("p-g-x", "old-pod-uid", exact("r", "fpga.example.com", 1))},
		want:    Charge{Own: list("cpu", "1")},
		wantErr: "pod team/p: ResourceClaim does not exist: team/p-g-x (the claim of that name belongs to another pod)",
	}, {
		name:    "a named claim that does not exist",
		pod:     pod(named("g", "gone")),
		want:    Charge{Own: list("cpu", "1")},
		wantErr: "pod team/p: ResourceClaim does not exist: team/gone",
	}, {
		name:   "firstAvailable: per class, the largest subrequest",
		pod:    pod(named("g", "fa")),
		claims: []*resourceapi.ResourceClaim{claim("fa", "", firstAvailable)},
		want:   Charge{Own: list("cpu", "1"), Shared: []Shared{{Key: "resourceclaim/uid-fa", Claim: "team/fa", Requests: list(gpu, "3", extended, "3", fpga, "2")}}},
	}, {
		name:   "once allocated, the allocation result is the truth",
		pod:    pod(named("g", "fa")),
		claims: []*resourceapi.ResourceClaim{allocated(claim("fa", "", firstAvailable), "any/small", "any/small", "any/small")},
		want:   Charge{Own: list("cpu", "1"), Shared: []Shared{{Key: "resourceclaim/uid-fa", Claim: "team/fa", Requests: list(gpu, "3", extended, "3")}}},
	}, {
		name:   "allocationMode All is unsized until allocated",
		pod:    pod(templated("g", "p-g-x")),
		claims: []*resourceapi.ResourceClaim{claim("p-g-x", "pod-uid", all("every", "fpga.example.com"), exact("one", "gpu.example.com", 1))},
		want: Charge{Own: list("cpu", "1", gpu, "1", extended, "1"),
			Unsized: []Unsized{{Claim: "team/p-g-x", Request: "every", Class: "fpga.example.com"}}},
	}, {
		name:   "allocationMode All, allocated: every device it got",
		pod:    pod(templated("g", "p-g-x")),
		claims: []*resourceapi.ResourceClaim{allocated(claim("p-g-x", "pod-uid", all("every", "fpga.example.com")), "every", "every", "every", "every")},
		want:   Charge{Own: list("cpu", "1", fpga, "4")},
	}, {
		name:    "a claim whose class is gone: counted by class name, with a reason",
		pod:     pod(named("g", "orphan")),
		claims:  []*resourceapi.ResourceClaim{claim("orphan", "", exact("r", "gone.example.com", 1))},
		want:    Charge{Own: list("cpu", "1"), Shared: []Shared{{Key: "resourceclaim/uid-orphan", Claim: "team/orphan", Requests: list("gone.example.com.deviceclass.resource.k8s.io/devices", "1")}}},
		wantErr: `pod team/p: ResourceClaim team/orphan: DeviceClass "gone.example.com" does not exist: its devices count under gone.example.com.deviceclass.resource.k8s.io/devices only`,
	}, {
		name: "a pod asking the extended resource counts the class's devices too",
		pod:  pod(requesting(list("cpu", "1", extended, "2"))),
		want: Charge{Own: list("cpu", "1", extended, "2", gpu, "2")},
	}, {
		name: "the implicit extended resource name counts the class and its explicit name",
		pod:  pod(requesting(list("deviceclass.resource.kubernetes.io/gpu.example.com", "1"))),
		want: Charge{Own: list("deviceclass.resource.kubernetes.io/gpu.example.com", "1", gpu, "1", extended, "1")},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			got, err := PodCharge(tc.pod, lookup(classes, tc.claims...))
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("charge (-want +got):\n%s", diff)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error = %q, want %q", gotErr, tc.wantErr)
			}
			if strings.Contains(tc.wantErr, "ResourceClaim does not exist") != errors.Is(err, ErrClaimMissing) {
				t.Errorf("errors.Is(err, ErrClaimMissing) = %v for %q", errors.Is(err, ErrClaimMissing), gotErr)
			}
			if diff := cmp.Diff(before, tc.pod); diff != "" {
				t.Errorf("PodCharge changed the pod:\n%s", diff)
			}
		})
	}
}

func TestRequestAddsOnlyUnchargedSharedClaims(t *testing.T) {
	ch := Charge{Own: list("cpu", "1"), Shared: []Shared{
		{Key: "resourceclaim/a", Requests: list(gpu, "1")},
		{Key: "resourceclaim/b", Requests: list(gpu, "2")},
	}}
	got := ch.Request(func(k types.UID) bool { return k == "resourceclaim/a" })
	if diff := cmp.Diff(list("cpu", "1", gpu, "2"), got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if _, changed := ch.Own[gpu]; changed {
		t.Errorf("Request changed Own: %v", ch.Own)
	}
	if got := ch.Request(func(types.UID) bool { return true }); len(got) != 1 {
		t.Errorf("every shared claim charged: request = %v, want Own only", got)
	}
}

func TestClassesNewerServesTheExtendedName(t *testing.T) {
	older, newer := class("old.example.com", extended, 1), class("new.example.com", extended, 2)
	for _, order := range [][]*resourceapi.DeviceClass{{older, newer}, {newer, older}} {
		c := NewClasses(order)
		if got := c.ExtendedClass(extended); got == nil || got.Name != "new.example.com" {
			t.Errorf("ExtendedClass(%s) = %v, want new.example.com", extended, got)
		}
		if got := c.ExtendedClass("deviceclass.resource.kubernetes.io/old.example.com"); got == nil || got.Name != "old.example.com" {
			t.Errorf("implicit name of the older class = %v", got)
		}
	}
	tie := NewClasses([]*resourceapi.DeviceClass{class("b.example.com", extended, 1), class("a.example.com", extended, 1)})
	if got := tie.ExtendedClass(extended); got.Name != "a.example.com" {
		t.Errorf("tie: %s serves %s, want a.example.com", got.Name, extended)
	}
}
