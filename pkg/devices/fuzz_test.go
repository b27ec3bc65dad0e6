package devices

import (
	"context"
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/quota/resources"
)

// FuzzSliceReading builds slices and classes from arbitrary bytes and an
// arbitrary selector: reading them must not panic, and no class or extended
// resource may count more devices than the node publishes.
func FuzzSliceReading(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, `device.driver == "gpu.example.com"`)
	f.Add([]byte{0, 0, 0, 0}, `device.attributes["gpu.example.com"].model == "a"`)
	f.Add([]byte{9, 200, 3}, `device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) > 0`)
	f.Add([]byte{}, `)(`)
	eval := NewEvaluator(DefaultFeatures)
	f.Fuzz(func(t *testing.T, data []byte, expression string) {
		var list []*resourcev1.ResourceSlice
		for i := 0; i+3 < len(data) && len(list) < 32; i += 4 {
			node, pool, gen, n := data[i]%3, data[i+1]%3, int64(data[i+2]%3)-1, int(data[i+3]%5)
			s := &resourcev1.ResourceSlice{}
			s.Name = fmt.Sprintf("slice-%d", i)
			s.Spec.Driver = []string{"", driver, "other.example.com"}[data[i]%3]
			s.Spec.Pool = resourcev1.ResourcePool{Name: fmt.Sprintf("pool-%d", pool), Generation: gen}
			if node > 0 {
				s.Spec.NodeName = ptr.To(fmt.Sprintf("node-%d", node))
			}
			for j := range n {
				d := resourcev1.Device{Name: fmt.Sprintf("dev-%d", j%3)}
				if j%2 == 0 {
					d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To(string(rune('a' + j)))}}
				}
				s.Spec.Devices = append(s.Spec.Devices, d)
			}
			list = append(list, s, nil)
		}
		classes := eval.Classes([]*resourcev1.DeviceClass{
			class("fuzzed", "example.com/gpu", expression),
			class("all", "example.com/gpu"),
		})
		for node, slices := range CurrentByNode(list) {
			devs := Devices(slices)
			got := classes.Count(context.Background(), devs)
			for name, q := range got.Resources {
				if q.Value() > int64(len(devs)) {
					t.Fatalf("node %s: %s counts %d of %d devices", node, name, q.Value(), len(devs))
				}
			}
			if all := got.Resources[resources.DeviceClassResource("all")]; all.Value() != int64(len(devs)) {
				t.Fatalf("node %s: a class without selectors counts %d of %d devices", node, all.Value(), len(devs))
			}
		}
	})
}
