package clusterapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quotascale/quotascale/cloudprovider"
)

// Upstream's scale-from-zero annotations, set on a MachineDeployment or a
// MachineSet to describe its nodes when it has none to copy.
const (
	CapacityAnnotationPrefix = "capacity.cluster-autoscaler.kubernetes.io/"
	CPUAnnotation            = CapacityAnnotationPrefix + "cpu"
	MemoryAnnotation         = CapacityAnnotationPrefix + "memory"
	EphemeralDiskAnnotation  = CapacityAnnotationPrefix + "ephemeral-disk"
	MaxPodsAnnotation        = CapacityAnnotationPrefix + "maxPods"
	GPUTypeAnnotation        = CapacityAnnotationPrefix + "gpu-type"
	GPUCountAnnotation       = CapacityAnnotationPrefix + "gpu-count"
	// LabelsAnnotation is "key=value,key=value"; TaintsAnnotation is
	// "key=value:Effect,key:Effect".
	LabelsAnnotation = CapacityAnnotationPrefix + "labels"
	TaintsAnnotation = CapacityAnnotationPrefix + "taints"

	defaultMaxPods = 110
)

// TemplateNodeInfo builds a Ready node from the group's capacity annotations,
// its machine template's labels that Cluster API copies to nodes, its machine
// template's taints, and the labels and taints annotations (which win). cpu and
// memory are required; without them it returns cloudprovider.ErrNotImplemented,
// meaning the group cannot scale from zero.
func (g *nodeGroup) TemplateNodeInfo() (*cloudprovider.NodeInfo, error) {
	a := g.obj.GetAnnotations()
	if a[CPUAnnotation] == "" || a[MemoryAnnotation] == "" {
		return nil, fmt.Errorf("%s: scale from zero needs the %s and %s annotations: %w", g.id, CPUAnnotation, MemoryAnnotation, cloudprovider.ErrNotImplemented)
	}
	capacity := corev1.ResourceList{}
	for _, r := range []struct {
		annotation string
		name       corev1.ResourceName
	}{
		{CPUAnnotation, corev1.ResourceCPU},
		{MemoryAnnotation, corev1.ResourceMemory},
		{EphemeralDiskAnnotation, corev1.ResourceEphemeralStorage},
	} {
		text := a[r.annotation]
		if text == "" {
			continue
		}
		q, err := resource.ParseQuantity(text)
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("%s: annotation %s: %q is not a non-negative quantity", g.id, r.annotation, text)
		}
		capacity[r.name] = q
	}
	pods := int64(defaultMaxPods)
	if text := a[MaxPodsAnnotation]; text != "" {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: annotation %s: %q is not a non-negative integer", g.id, MaxPodsAnnotation, text)
		}
		pods = n
	}
	capacity[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	if text := a[GPUCountAnnotation]; text != "" {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: annotation %s: %q is not a non-negative integer", g.id, GPUCountAnnotation, text)
		}
		gpuType := a[GPUTypeAnnotation]
		if gpuType == "" || len(content.IsLabelKey(gpuType)) > 0 {
			return nil, fmt.Errorf("%s: annotation %s: %q is not a resource name such as nvidia.com/gpu", g.id, GPUTypeAnnotation, gpuType)
		}
		if n > 0 {
			capacity[corev1.ResourceName(gpuType)] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}

	name := g.name
	if len(name) > 54 {
		name = name[:54]
	}
	name += "-template"
	labels := map[string]string{
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	templateLabels, _, _ := unstructured.NestedStringMap(g.obj.Object, "spec", "template", "metadata", "labels")
	for k, v := range templateLabels {
		if propagatesToNode(k) {
			labels[k] = v
		}
	}
	annotationLabels, err := parseLabels(a[LabelsAnnotation])
	if err != nil {
		return nil, fmt.Errorf("%s: annotation %s: %w", g.id, LabelsAnnotation, err)
	}
	for k, v := range annotationLabels {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = name

	taints, err := g.taints(a[TaintsAnnotation])
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
	return &cloudprovider.NodeInfo{Node: node}, nil
}

// propagatesToNode says whether Cluster API copies a machine label to its node:
// node-role.kubernetes.io/*, and the node-restriction.kubernetes.io and
// node.cluster.x-k8s.io domains with their subdomains.
func propagatesToNode(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	if prefix == "node-role.kubernetes.io" {
		return true
	}
	for _, domain := range []string{"node-restriction.kubernetes.io", "node.cluster.x-k8s.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}

func parseLabels(text string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(text) == "" {
		return out, nil
	}
	for _, item := range strings.Split(text, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(item), "=")
		if !found || len(content.IsLabelKey(k)) > 0 || len(content.IsLabelValue(v)) > 0 {
			return nil, fmt.Errorf("%q is not key=value with a valid label key and value", item)
		}
		out[k] = v
	}
	return out, nil
}

// taints merges the machine template's taints with the annotation's, which
// replace template taints of the same key and effect. The result is sorted.
func (g *nodeGroup) taints(annotation string) ([]corev1.Taint, error) {
	type keyEffect struct{ key, effect string }
	byKey := map[keyEffect]corev1.Taint{}
	raw, _, _ := unstructured.NestedSlice(g.obj.Object, "spec", "template", "spec", "taints")
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		t := corev1.Taint{}
		t.Key, _ = m["key"].(string)
		t.Value, _ = m["value"].(string)
		effect, _ := m["effect"].(string)
		t.Effect = corev1.TaintEffect(effect)
		byKey[keyEffect{t.Key, effect}] = t
	}
	if strings.TrimSpace(annotation) != "" {
		for _, item := range strings.Split(annotation, ",") {
			t, err := parseTaint(strings.TrimSpace(item))
			if err != nil {
				return nil, fmt.Errorf("%s: annotation %s: %w", g.id, TaintsAnnotation, err)
			}
			byKey[keyEffect{t.Key, string(t.Effect)}] = t
		}
	}
	if len(byKey) == 0 {
		return nil, nil
	}
	out := make([]corev1.Taint, 0, len(byKey))
	for _, t := range byKey {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Effect < out[j].Effect
	})
	return out, nil
}

// parseTaint reads "key=value:Effect" or "key:Effect".
func parseTaint(text string) (corev1.Taint, error) {
	kv, effect, found := strings.Cut(text, ":")
	k, v, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
	validEffect := t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectPreferNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	if !found || !validEffect || len(content.IsLabelKey(k)) > 0 || (v != "" && len(content.IsLabelValue(v)) > 0) {
		return corev1.Taint{}, fmt.Errorf("%q is not key=value:Effect or key:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute", text)
	}
	return t, nil
}
