package nodetemplate

import (
	"reflect"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResourceSlicesFor(t *testing.T) {
	node := func(n string) *string { return &n }
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gpu-1", UID: "u"}}
	slices := []*resourcev1.ResourceSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1-gpu.example.com", UID: "s1", ResourceVersion: "7", OwnerReferences: owned},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: node("gpu-1"),
				Pool: resourcev1.ResourcePool{Name: "gpu-1", Generation: 3, ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "device-0"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nic-slice"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "nic.example.com", NodeName: node("gpu-1"), Pool: resourcev1.ResourcePool{Name: "nics"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: node("gpu-2")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "network"}, Spec: resourcev1.ResourceSliceSpec{Driver: "net.example.com"}},
		nil,
	}
	got := ResourceSlicesFor(slices, "gpu-1", "template-gpu-new-0")
	want := []*resourcev1.ResourceSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "template-gpu-new-0-gpu.example.com"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: node("template-gpu-new-0"),
				Pool: resourcev1.ResourcePool{Name: "template-gpu-new-0", Generation: 3, ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "device-0"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nic-slice-template-gpu-new-0"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "nic.example.com", NodeName: node("template-gpu-new-0"), Pool: resourcev1.ResourcePool{Name: "nics-template-gpu-new-0"}}},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("copies:\n got %+v\nwant %+v", got, want)
	}
	if *slices[0].Spec.NodeName != "gpu-1" || slices[0].Spec.Pool.Name != "gpu-1" || slices[0].UID != "s1" {
		t.Errorf("the original changed: %+v", slices[0])
	}
}
