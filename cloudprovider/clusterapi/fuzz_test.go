package clusterapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzNodeGroupAnnotations feeds arbitrary size and scale-from-zero annotations
// (user text on a MachineDeployment) to the node group and template builders:
// they never panic, a group they accept has 0 <= min <= max, and a template
// they accept has the annotated cpu and memory, only valid label keys, and
// devices in one slice of at most 128, local to the template node.
func FuzzNodeGroupAnnotations(f *testing.F) {
	f.Add("1", "5", "4", "16Gi", "110", "nvidia.com/gpu", "1", "gpu.example.com", "pool=a,tier=gpu", "gpu=true:NoSchedule")
	f.Add("0", "0", "500m", "1Gi", "", "", "", "", "", "")
	f.Add("3", "2", "-1", "x", "-5", "not a name", "-1", "Not_A.Driver", "novalue", "=:Bogus")
	f.Add("", "5", "", "", "", "", "", "", " , ", " , ")
	f.Add("0", "5", "4", "16Gi", "", "", "129", "gpu.example.com", "", "")
	f.Fuzz(func(t *testing.T, minSize, maxSize, cpu, memory, maxPods, gpuType, gpuCount, draDriver, labels, taints string) {
		annotations := map[string]string{}
		for key, value := range map[string]string{
			NodeGroupMinSizeAnnotation: minSize, NodeGroupMaxSizeAnnotation: maxSize,
			CPUAnnotation: cpu, MemoryAnnotation: memory, MaxPodsAnnotation: maxPods,
			GPUTypeAnnotation: gpuType, GPUCountAnnotation: gpuCount, DRADriverAnnotation: draDriver,
			LabelsAnnotation: labels, TaintsAnnotation: taints,
		} {
			if value != "" {
				annotations[key] = value
			}
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
			"metadata": map[string]any{"name": "md", "namespace": "default"},
			"spec":     map[string]any{"replicas": int64(1)},
		}}
		obj.SetAnnotations(annotations)
		g, err := (&Provider{}).newNodeGroup("MachineDeployment", obj)
		if err != nil || g == nil {
			return
		}
		if g.MinSize() < 0 || g.MaxSize() < g.MinSize() {
			t.Fatalf("accepted sizes min %d max %d from %q, %q", g.MinSize(), g.MaxSize(), minSize, maxSize)
		}
		info, err := g.TemplateNodeInfo()
		if err != nil {
			return
		}
		c := info.Node.Status.Capacity
		if c.Cpu().Sign() < 0 || c.Memory().Sign() < 0 || c.Pods().Sign() < 0 {
			t.Fatalf("negative capacity %v accepted", c)
		}
		if _, ok := c[corev1.ResourceCPU]; !ok {
			t.Fatalf("template without cpu accepted: %v", c)
		}
		for k, v := range info.Node.Labels {
			if len(content.IsLabelKey(k)) > 0 || len(content.IsLabelValue(v)) > 0 {
				t.Fatalf("invalid label %q=%q on the template node", k, v)
			}
		}
		for _, s := range info.ResourceSlices {
			if len(info.ResourceSlices) > 1 || len(s.Spec.Devices) > resourcev1.ResourceSliceMaxDevices ||
				s.Spec.NodeName == nil || *s.Spec.NodeName != info.Node.Name || len(content.IsDNS1123Subdomain(s.Spec.Driver)) > 0 {
				t.Fatalf("template slices %d, this one: driver %q, %d devices, node %v", len(info.ResourceSlices), s.Spec.Driver, len(s.Spec.Devices), s.Spec.NodeName)
			}
		}
	})
}
