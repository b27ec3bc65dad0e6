package clusterapi

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider"
)

func scalable(kind, name string, annotations map[string]string, replicas int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "ns"},
		"spec":       map[string]any{"replicas": replicas},
	}}
	u.SetAnnotations(annotations)
	return u
}

func sizes(minSize, maxSize string) map[string]string {
	return map[string]string{NodeGroupMinSizeAnnotation: minSize, NodeGroupMaxSizeAnnotation: maxSize}
}

func newFakeProvider(t *testing.T, objs ...runtime.Object) *Provider {
	t.Helper()
	return newFakeProviderWith(t, Options{}, objs...)
}

// fakeListKinds are the list kinds of the resources the provider watches.
func fakeListKinds() map[schema.GroupVersionResource]string {
	return map[schema.GroupVersionResource]string{
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinedeployments"}: "MachineDeploymentList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinesets"}:        "MachineSetList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinepools"}:       "MachinePoolList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machines"}:           "MachineList",
		infraTemplates: "KwokMachineTemplateList",
	}
}

// newFakeProviderWith runs the provider on a fake dynamic client holding
// objs; opts.Client is set here.
func newFakeProviderWith(t *testing.T, opts Options, objs ...runtime.Object) *Provider {
	t.Helper()
	opts.Client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), fakeListKinds(), objs...)
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProvider(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup() })
	return p
}

var infraTemplates = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "kwokmachinetemplates"}

// TestDiscovery: which objects are node groups, which machines are theirs, and
// which group a node maps to.
func TestDiscovery(t *testing.T) {
	owned := scalable("MachineSet", "md-a-xyz", sizes("0", "9"), 1)
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "md-a", UID: "u1"}})
	inMD := machine("md-a-xyz-1", map[string]any{"providerID": "aws:///zone/i-1"}, map[string]any{"nodeRef": map[string]any{"name": "n1"}})
	inMD.SetLabels(map[string]string{DeploymentNameLabel: "md-a"})
	inMD2 := machine("md-a-xyz-2", nil, nil)
	inMD2.SetLabels(map[string]string{DeploymentNameLabel: "md-a"})
	inMS := machine("ms-b-1", map[string]any{"providerID": "aws:///zone/i-2"}, nil)
	inMS.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "ms-b", UID: "u2"}})
	inPlain := machine("plain-1", map[string]any{"providerID": "aws:///zone/i-3"}, nil)
	inPlain.SetLabels(map[string]string{DeploymentNameLabel: "md-plain"})

	p := newFakeProvider(t,
		scalable("MachineDeployment", "md-a", sizes("1", "5"), 2),
		scalable("MachineDeployment", "md-plain", nil, 1),
		scalable("MachineDeployment", "md-only-max", map[string]string{NodeGroupMaxSizeAnnotation: "3"}, 1),
		scalable("MachineDeployment", "md-inverted", sizes("4", "2"), 1),
		scalable("MachineDeployment", "md-words", sizes("one", "2"), 1),
		owned,
		scalable("MachineSet", "ms-b", sizes("0", "3"), 1),
		inMD, inMD2, inMS, inPlain,
	)
	var got []string
	for _, g := range p.NodeGroups() {
		got = append(got, g.Debug())
	}
	want := []string{
		"MachineDeployment/ns/md-a (min: 1, max: 5, replicas: 2)",
		"MachineSet/ns/ms-b (min: 0, max: 3, replicas: 1)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node groups (-want +got):\n%s", diff)
	}
	instances, err := p.NodeGroups()[0].Nodes()
	if err != nil {
		t.Fatal(err)
	}
	wantInstances := []cloudprovider.Instance{
		{Id: "aws:///zone/i-1", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}},
		{Id: "clusterapi-pending://ns/md-a-xyz-2", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}},
	}
	if diff := cmp.Diff(wantInstances, instances); diff != "" {
		t.Errorf("md-a instances (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		node *corev1.Node
		want string
	}{
		{"machine annotations", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
			MachineAnnotation: "md-a-xyz-1", ClusterNamespaceAnnotation: "ns"}}}, "MachineDeployment/ns/md-a"},
		{"machine annotation without namespace", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
			MachineAnnotation: "ms-b-1"}}}, "MachineSet/ns/ms-b"},
		{"provider ID", &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///zone/i-2"}}, "MachineSet/ns/ms-b"},
		{"pending ID of a failed machine", &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "clusterapi-pending://ns/md-a-xyz-2"}}, "MachineDeployment/ns/md-a"},
		{"machine of a group without annotations", &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///zone/i-3"}}, ""},
		{"unknown", &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///zone/i-9"}}, ""},
		{"nothing", &corev1.Node{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := p.NodeGroupForNode(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if g != nil {
				got = g.Id()
			}
			if got != tc.want {
				t.Errorf("NodeGroupForNode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTemplateNodeInfo(t *testing.T) {
	annotations := sizes("0", "5")
	for k, v := range map[string]string{
		CPUAnnotation: "8", MemoryAnnotation: "32Gi", EphemeralDiskAnnotation: "100Gi", MaxPodsAnnotation: "200",
		GPUTypeAnnotation: "nvidia.com/gpu", GPUCountAnnotation: "2",
		LabelsAnnotation: "cloud.google.com/machine-family=n2, zone=a",
		TaintsAnnotation: "gpu=true:NoSchedule,dedicated:NoExecute",
	} {
		annotations[k] = v
	}
	md := scalable("MachineDeployment", "gpu-pool", annotations, 0)
	_ = unstructured.SetNestedStringMap(md.Object, map[string]string{
		"node-role.kubernetes.io/worker": "", "node.cluster.x-k8s.io/pool": "gpu", "team": "ml", "zone": "b",
	}, "spec", "template", "metadata", "labels")
	_ = unstructured.SetNestedSlice(md.Object, []any{
		map[string]any{"key": "gpu", "value": "false", "effect": "NoSchedule", "propagation": "Always"},
		map[string]any{"key": "init", "effect": "NoSchedule", "propagation": "OnInitialization"},
	}, "spec", "template", "spec", "taints")
	p := newFakeProvider(t, md)
	info, err := p.NodeGroups()[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"), corev1.ResourcePods: resource.MustParse("200"),
		"nvidia.com/gpu": resource.MustParse("2"),
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-pool-template", Labels: map[string]string{
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "gpu-pool-template",
			"node-role.kubernetes.io/worker": "", "node.cluster.x-k8s.io/pool": "gpu",
			"cloud.google.com/machine-family": "n2", "zone": "a",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "dedicated", Effect: corev1.TaintEffectNoExecute},
			{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "init", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
			NodeInfo:   corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	equateQuantities := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	if diff := cmp.Diff(want, info.Node, equateQuantities); diff != "" {
		t.Errorf("template (-want +got):\n%s", diff)
	}
}

func TestTemplateNodeInfoErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no capacity", nil, "MachineDeployment/ns/md: scale from zero needs cpu and memory in the infrastructure machine template's status.capacity or the capacity.cluster-autoscaler.kubernetes.io/cpu and capacity.cluster-autoscaler.kubernetes.io/memory annotations: not implemented"},
		{"bad cpu", map[string]string{CPUAnnotation: "lots", MemoryAnnotation: "1Gi"},
			`MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/cpu: "lots" is not a non-negative quantity`},
		{"bad max pods", map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", MaxPodsAnnotation: "1.5"},
			`MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/maxPods: "1.5" is not a non-negative integer`},
		{"bad gpu type", map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", GPUCountAnnotation: "1", GPUTypeAnnotation: "a/b/c"},
			`MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/gpu-type: "a/b/c" is not a resource name such as nvidia.com/gpu`},
		{"bad labels", map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", LabelsAnnotation: "a=b,c"},
			`MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/labels: "c" is not key=value with a valid label key and value`},
		{"bad taint", map[string]string{CPUAnnotation: "1", MemoryAnnotation: "1Gi", TaintsAnnotation: "a=b:Never"},
			`MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/taints: "a=b:Never" is not key=value:Effect or key:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotations := sizes("0", "1")
			for k, v := range tc.annotations {
				annotations[k] = v
			}
			p := newFakeProvider(t, scalable("MachineDeployment", "md", annotations, 1))
			_, err := p.NodeGroups()[0].TemplateNodeInfo()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.annotations == nil && !errors.Is(err, cloudprovider.ErrNotImplemented) {
				t.Errorf("want ErrNotImplemented, got %v", err)
			}
		})
	}
}

// TestTemplateNodeInfoDRADriver: upstream's dra-driver annotation with a
// gpu-count gives a template scaled from zero the node-local ResourceSlice
// that driver will publish, its pool named after the node; a bad driver name
// or more devices than a slice holds is refused, naming the annotation.
func TestTemplateNodeInfoDRADriver(t *testing.T) {
	a := sizes("0", "3")
	a[CPUAnnotation], a[MemoryAnnotation], a[GPUCountAnnotation], a[DRADriverAnnotation] = "4", "8Gi", "2", "gpu.example.com"
	p := newFakeProvider(t, scalable("MachineDeployment", "md", a, 0))
	info, err := p.NodeGroups()[0].TemplateNodeInfo()
	if err != nil {
		t.Fatalf("TemplateNodeInfo: %v", err)
	}
	gpu := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": {StringValue: ptr.To("gpu")}}
	want := []*resourcev1.ResourceSlice{{
		ObjectMeta: metav1.ObjectMeta{Name: "md-template-gpu.example.com"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.example.com", NodeName: ptr.To("md-template"),
			Pool:    resourcev1.ResourcePool{Name: "md-template", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: gpu}, {Name: "gpu-1", Attributes: gpu}},
		},
	}}
	if diff := cmp.Diff(want, info.ResourceSlices); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}
	if _, ok := info.Node.Status.Capacity["gpu.example.com"]; ok {
		t.Errorf("capacity %v has the driver as a resource", info.Node.Status.Capacity)
	}
	for _, tc := range []struct{ driver, count, want string }{
		{"Not_A.Driver", "1", `MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/dra-driver: "Not_A.Driver" is not a driver name such as gpu.example.com`},
		{"gpu.example.com", "129", `MachineDeployment/ns/md: annotation capacity.cluster-autoscaler.kubernetes.io/gpu-count: 129 devices of driver gpu.example.com are more than one ResourceSlice holds (128)`},
	} {
		a[DRADriverAnnotation], a[GPUCountAnnotation] = tc.driver, tc.count
		// A group at zero without a template is left out; one with a
		// replica (not yet a node) is asked for its template.
		p := newFakeProvider(t, scalable("MachineDeployment", "md", a, 1))
		if _, err := p.NodeGroups()[0].TemplateNodeInfo(); err == nil || err.Error() != tc.want {
			t.Errorf("driver %q, count %s: error %v, want %q", tc.driver, tc.count, err, tc.want)
		}
	}
}

// TestGPUCountWithoutType: upstream accepts a gpu-count without a gpu-type
// and leaves the GPUs out of the template; the zero-sized group still scales
// from zero on its cpu and memory.
func TestGPUCountWithoutType(t *testing.T) {
	a := sizes("0", "3")
	a[CPUAnnotation], a[MemoryAnnotation], a[GPUCountAnnotation] = "4", "8Gi", "2"
	p := newFakeProvider(t, scalable("MachineDeployment", "md", a, 0))
	info, err := p.NodeGroups()[0].TemplateNodeInfo()
	if err != nil {
		t.Fatalf("TemplateNodeInfo: %v", err)
	}
	q := resource.MustParse
	want := corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("110")}
	if diff := cmp.Diff(want, info.Node.Status.Capacity, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
}
