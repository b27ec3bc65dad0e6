package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestDeviceClassResourceRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name      corev1.ResourceName
		wantClass string
		wantOK    bool
	}{
		{name: "gpu.example.com.deviceclass.resource.k8s.io/devices", wantClass: "gpu.example.com", wantOK: true},
		{name: "gpu.deviceclass.resource.k8s.io/devices", wantClass: "gpu", wantOK: true},
		{name: ".deviceclass.resource.k8s.io/devices"},
		{name: "Gpu_A.deviceclass.resource.k8s.io/devices"},
		{name: "gpu.example.com.deviceclass.resource.k8s.io/device"},
		{name: "nvidia.com/gpu"},
		{name: "cpu"},
		{name: "requests.gpu.deviceclass.resource.k8s.io/devices", wantClass: "requests.gpu", wantOK: true},
	} {
		class, ok := DeviceClassOf(tc.name)
		if class != tc.wantClass || ok != tc.wantOK {
			t.Errorf("DeviceClassOf(%q) = %q, %v; want %q, %v", tc.name, class, ok, tc.wantClass, tc.wantOK)
		}
		if ok {
			if back := DeviceClassResource(class); back != tc.name {
				t.Errorf("DeviceClassResource(%q) = %q, want %q", class, back, tc.name)
			}
		}
	}
}

func FuzzDeviceClassOf(f *testing.F) {
	f.Add("gpu.example.com.deviceclass.resource.k8s.io/devices")
	f.Add(".deviceclass.resource.k8s.io/devices")
	f.Add("nvidia.com/gpu")
	f.Fuzz(func(t *testing.T, name string) {
		class, ok := DeviceClassOf(corev1.ResourceName(name))
		if !ok {
			return
		}
		if got := DeviceClassResource(class); string(got) != name {
			t.Fatalf("DeviceClassResource(DeviceClassOf(%q)) = %q", name, got)
		}
	})
}
