package devices

import (
	"context"
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
)

// BenchmarkCountNode is what the autoscaler pays when one node's slices or
// the classes change: a node of 8 devices against 3 classes (one by driver,
// one by attribute, one serving an extended resource).
func BenchmarkCountNode(b *testing.B) {
	var devs []resourcev1.Device
	for i := range 8 {
		devs = append(devs, device(fmt.Sprintf("gpu-%d", i), "a100"))
	}
	node := Devices([]*resourcev1.ResourceSlice{slice("s", "n", "pool", 1, devs...)})
	classes := NewEvaluator(DefaultFeatures).Classes([]*resourcev1.DeviceClass{
		class("gpu.example.com", "", `device.driver == "gpu.example.com"`),
		class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`),
		class("any", "example.com/gpu"),
	})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		classes.Count(ctx, node)
	}
}
