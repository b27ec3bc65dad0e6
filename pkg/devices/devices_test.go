package devices

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const driver = "gpu.example.com"

func slice(name, node, pool string, generation int64, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.Spec.Driver = driver
	s.Spec.Pool = resourcev1.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: 1}
	if node != "" {
		s.Spec.NodeName = ptr.To(node)
	} else {
		s.Spec.AllNodes = ptr.To(true)
	}
	s.Spec.Devices = devices
	return s
}

func device(name, model string) resourcev1.Device {
	d := resourcev1.Device{Name: name}
	if model != "" {
		d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To(model)}}
	}
	return d
}

func class(name, extended string, expressions ...string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range expressions {
		c.Spec.Selectors = append(c.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return c
}

func names(list []*resourcev1.ResourceSlice) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}

func TestCurrentByNodeKeepsNodeLocalCurrentGeneration(t *testing.T) {
	list := []*resourcev1.ResourceSlice{
		slice("a-old", "a", "pool-a", 1, device("gpu-0", "")),
		slice("a-new-2", "a", "pool-a", 2, device("gpu-1", "")),
		slice("a-new-1", "a", "pool-a", 2, device("gpu-0", "")),
		slice("b", "b", "pool-b", 7, device("gpu-0", "")),
		slice("network", "", "fabric", 1, device("nic-0", "")),
		nil,
	}
	got := map[string][]string{}
	for node, slices := range CurrentByNode(list) {
		got[node] = names(slices)
	}
	want := map[string][]string{"a": {"a-new-1", "a-new-2"}, "b": {"b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CurrentByNode (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a-new-1", "a-new-2", "b"}, names(Current(list))); diff != "" {
		t.Errorf("Current (-want +got):\n%s", diff)
	}
}

func TestDevicesListsEachDeviceOnce(t *testing.T) {
	list := []*resourcev1.ResourceSlice{
		slice("s1", "a", "pool", 1, device("gpu-0", ""), device("gpu-1", "")),
		slice("s2", "a", "pool", 1, device("gpu-1", ""), device("gpu-2", "")),
		slice("other", "a", "other-pool", 1, device("gpu-0", "")),
	}
	var ids []string
	for _, d := range Devices(list) {
		ids = append(ids, d.ID())
	}
	want := []string{"gpu.example.com/pool/gpu-0", "gpu.example.com/pool/gpu-1", "gpu.example.com/pool/gpu-2", "gpu.example.com/other-pool/gpu-0"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("Devices (-want +got):\n%s", diff)
	}
}

func count(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

func TestCountPerClassAndExtendedResource(t *testing.T) {
	ctx := context.Background()
	node := Devices([]*resourcev1.ResourceSlice{slice("s", "a", "pool", 1,
		device("gpu-0", "a100"), device("gpu-1", "a100"), device("gpu-2", "h100"))})
	tests := []struct {
		name     string
		classes  []*resourcev1.DeviceClass
		want     corev1.ResourceList
		problems []string
	}{{
		name:    "a class with no selector selects every device",
		classes: []*resourcev1.DeviceClass{class("all", "")},
		want:    corev1.ResourceList{"all.deviceclass.resource.k8s.io/devices": count(3)},
	}, {
		name: "classes select by driver and attribute; one selecting nothing is absent",
		classes: []*resourcev1.DeviceClass{
			class("gpu.example.com", "", `device.driver == "gpu.example.com"`),
			class("a100", "", `device.driver == "gpu.example.com"`, `device.attributes["gpu.example.com"].model == "a100"`),
			class("other", "", `device.driver == "other.example.com"`),
		},
		want: corev1.ResourceList{
			"gpu.example.com.deviceclass.resource.k8s.io/devices": count(3),
			"a100.deviceclass.resource.k8s.io/devices":            count(2),
		},
	}, {
		name: "two classes serving one extended resource count a device they share once",
		classes: []*resourcev1.DeviceClass{
			class("a100", "example.com/gpu", `device.attributes["gpu.example.com"].model == "a100"`),
			class("any", "example.com/gpu"),
		},
		want: corev1.ResourceList{
			"a100.deviceclass.resource.k8s.io/devices": count(2),
			"any.deviceclass.resource.k8s.io/devices":  count(3),
			"example.com/gpu":                          count(3),
		},
	}, {
		name: "a selector failing at run time keeps the devices it failed on out and says why, once",
		classes: []*resourcev1.DeviceClass{
			class("broken", "example.com/gpu", `device.attributes["gpu.example.com"].memory > 1`),
			class("fine", "", `device.driver == "gpu.example.com"`),
		},
		want:     corev1.ResourceList{"fine.deviceclass.resource.k8s.io/devices": count(3)},
		problems: []string{"broken: DeviceClass broken: device selector failed: selector #0 on device gpu.example.com/pool/gpu-0: CEL runtime error:"},
	}, {
		name:     "a selector that does not compile selects nothing",
		classes:  []*resourcev1.DeviceClass{class("bad", "", `device.driver ==`)},
		want:     corev1.ResourceList{},
		problems: []string{"bad: DeviceClass bad: device selector failed: selector #0: CEL compile error:"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewEvaluator(DefaultFeatures).Classes(tt.classes).Count(ctx, node)
			if diff := cmp.Diff(tt.want, got.Resources); diff != "" {
				t.Errorf("Resources (-want +got):\n%s", diff)
			}
			if len(got.Problems) != len(tt.problems) {
				t.Fatalf("Problems = %+v, want %d starting %q", got.Problems, len(tt.problems), tt.problems)
			}
			for i, p := range got.Problems {
				if text := p.Class + ": " + p.Reason; !strings.HasPrefix(text, tt.problems[i]) {
					t.Errorf("problem %d = %q, want it to start %q", i, text, tt.problems[i])
				}
			}
		})
	}
}

func TestMatchesAddsRequestSelectorsAndNamesMissingClass(t *testing.T) {
	ctx := context.Background()
	classes := NewEvaluator(DefaultFeatures).Classes([]*resourcev1.DeviceClass{class("gpu", "", `device.driver == "gpu.example.com"`)})
	devs := Devices([]*resourcev1.ResourceSlice{slice("s", "a", "pool", 1, device("gpu-0", "a100"), device("gpu-1", "h100"))})
	h100 := []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "h100"`}}}
	var got []bool
	for _, d := range devs {
		ok, err := classes.Matches(ctx, "gpu", h100, d)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ok)
	}
	if diff := cmp.Diff([]bool{false, true}, got); diff != "" {
		t.Errorf("Matches with request selectors (-want +got):\n%s", diff)
	}
	if ok, err := classes.Matches(ctx, "absent", nil, devs[0]); ok || !errors.Is(err, ErrClassNotFound) || !strings.Contains(err.Error(), `"absent"`) {
		t.Errorf("Matches(absent) = %v, %v; want false and ErrClassNotFound naming the class", ok, err)
	}
	notCEL := []resourcev1.DeviceSelector{{}}
	if ok, err := classes.Matches(ctx, "gpu", notCEL, devs[0]); ok || !errors.Is(err, ErrSelector) {
		t.Errorf("Matches(non-CEL selector) = %v, %v; want false and ErrSelector", ok, err)
	}
}

func TestServingListsClassesOfAnExtendedResource(t *testing.T) {
	classes := NewEvaluator(DefaultFeatures).Classes([]*resourcev1.DeviceClass{
		class("b", "example.com/gpu"), class("a", "example.com/gpu"), class("c", ""), nil,
	})
	if diff := cmp.Diff([]string{"a", "b"}, classes.Serving("example.com/gpu")); diff != "" {
		t.Errorf("Serving (-want +got):\n%s", diff)
	}
	if _, ok := classes.Get("c"); !ok {
		t.Error("Get(c) not found")
	}
}

func TestWithDevicesAddsWhatCapacityLacks(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "gpu"}}}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: count(8), "plugin.example.com/gpu": count(4)}
	devs := corev1.ResourceList{
		"gpu.deviceclass.resource.k8s.io/devices": count(2),
		"dra.example.com/gpu":                     count(2),
		"plugin.example.com/gpu":                  count(2), // a device plugin serves it here: capacity wins
	}
	got := WithDevices(node, devs)
	want := corev1.ResourceList{
		corev1.ResourceCPU:                        count(8),
		"plugin.example.com/gpu":                  count(4),
		"gpu.deviceclass.resource.k8s.io/devices": count(2),
		"dra.example.com/gpu":                     count(2),
	}
	if diff := cmp.Diff(want, got.Status.Capacity); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	if len(node.Status.Capacity) != 2 || got == node || got.Labels["pool"] != "gpu" {
		t.Errorf("WithDevices changed the node or did not copy it: %v", node.Status.Capacity)
	}
	if WithDevices(node, nil) != node || WithDevices(node, corev1.ResourceList{"plugin.example.com/gpu": count(1)}) != node {
		t.Error("WithDevices copied a node it adds nothing to")
	}
	if WithDevices(nil, devs) != nil {
		t.Error("WithDevices(nil) is not nil")
	}
}
