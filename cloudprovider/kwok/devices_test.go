package kwok

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const gpuConfig = `
nodeGroups:
- name: gpu
  minSize: 0
  maxSize: 3
  capacity: {cpu: "8", memory: 32Gi}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      model: {string: a100}
      gpu.example.com/cores: {int: 64}
    capacity: {memory: 40Gi}
  - driver: nic.example.com
    count: 1
`

// The template node and a real node of a group with devices declare the same
// devices, and NodeResourceSlices publishes them as node-local pools named
// after the node, owned by it when it has a UID.
func TestNodeResourceSlicesFromConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(gpuConfig))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.compile()
	if err != nil {
		t.Fatal(err)
	}
	node := c.groups["gpu"].node("gpu-abcde", "kwok://gpu/gpu-abcde")
	node.UID = types.UID("uid-1")
	got, err := NodeResourceSlices(node)
	if err != nil {
		t.Fatal(err)
	}
	gpu := resourcev1.Device{
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"model": {StringValue: ptr.To("a100")}, "gpu.example.com/cores": {IntValue: ptr.To[int64](64)},
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}},
	}
	gpu0, gpu1 := *gpu.DeepCopy(), *gpu.DeepCopy()
	gpu0.Name, gpu1.Name = "device-0", "device-1"
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gpu-abcde", UID: "uid-1", Controller: ptr.To(true)}}
	labels := map[string]string{"app.kubernetes.io/managed-by": DriverManagedBy}
	want := []*resourcev1.ResourceSlice{{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-abcde-gpu.example.com", Labels: labels, OwnerReferences: owner},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("gpu-abcde"),
			Pool: resourcev1.ResourcePool{Name: "gpu-abcde", Generation: 1, ResourceSliceCount: 1}, Devices: []resourcev1.Device{gpu0, gpu1}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-abcde-nic.example.com", Labels: labels, OwnerReferences: owner},
		Spec: resourcev1.ResourceSliceSpec{Driver: "nic.example.com", NodeName: ptr.To("gpu-abcde"),
			Pool: resourcev1.ResourcePool{Name: "gpu-abcde", Generation: 1, ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "device-0"}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}

	template := c.groups["gpu"].templateNode()
	fromTemplate, err := NodeResourceSlices(template)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromTemplate) != 2 || *fromTemplate[0].Spec.NodeName != template.Name || len(fromTemplate[0].OwnerReferences) != 0 {
		t.Errorf("template slices: %+v", fromTemplate)
	}
	plain := c.groups["gpu"].node("x", "kwok://gpu/x")
	delete(plain.Annotations, DevicesAnnotation)
	if none, err := NodeResourceSlices(plain); err != nil || none != nil {
		t.Errorf("a node without devices: %v, %v", none, err)
	}
}

func TestDevicesConfigProblems(t *testing.T) {
	tests := []struct {
		name    string
		devices string
		want    []string
	}{
		{name: "no driver", devices: `[{count: 1}]`, want: []string{"nodeGroups[0] (g): devices[0].driver is required"}},
		{name: "bad driver and count", devices: `[{driver: Not_A_Domain, count: 0}]`, want: []string{
			`nodeGroups[0] (g): devices[0].driver: "Not_A_Domain" must be a DNS subdomain of at most 63 characters`,
			"nodeGroups[0] (g): devices[0].count: 0 is not between 1 and 128",
		}},
		{name: "same driver twice", devices: `[{driver: a.example.com, count: 1}, {driver: a.example.com, count: 2}]`, want: []string{
			`nodeGroups[0] (g): devices[1].driver: "a.example.com" is also the driver of devices[0]`,
		}},
		{name: "attributes and capacity", devices: `[{driver: a.example.com, count: 1, attributes: {"9x": {int: 1}, two: {int: 1, string: a}, none: {}},
			capacity: {memory: lots, neg: "-1"}}]`, want: []string{
			`nodeGroups[0] (g): devices[0].attributes: "9x" is not a C identifier, optionally prefixed by a DNS subdomain and '/'`,
			"nodeGroups[0] (g): devices[0].attributes[none]: 0 of bool, int, string and version are set, not exactly one",
			"nodeGroups[0] (g): devices[0].attributes[two]: 2 of bool, int, string and version are set, not exactly one",
			`nodeGroups[0] (g): devices[0].capacity[memory]: "lots" is not a quantity`,
			`nodeGroups[0] (g): devices[0].capacity[neg]: "-1" is negative`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte("nodeGroups:\n- name: g\n  maxSize: 1\n  capacity: {cpu: \"1\", memory: 1Gi}\n  devices: " + tc.devices + "\n"))
			var cfgErr *ConfigError
			if !errors.As(err, &cfgErr) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if diff := cmp.Diff(tc.want, cfgErr.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// A node whose annotation declares devices wrongly publishes none, with an
// error naming the node.
func TestNodeResourceSlicesBadAnnotation(t *testing.T) {
	for _, value := range []string{`{`, `[{"driver":"a.example.com","count":500}]`} {
		n := (&groupSpec{name: "g"}).node("g-1", "kwok://g/g-1")
		n.Annotations[DevicesAnnotation] = value
		if slices, err := NodeResourceSlices(n); err == nil || slices != nil {
			t.Errorf("annotation %s: slices %v, error %v", value, slices, err)
		}
	}
}
