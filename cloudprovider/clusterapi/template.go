package clusterapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
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
	// DRADriverAnnotation names the DRA driver that publishes the GPUs
	// gpu-count counts, as ResourceSlice devices rather than (or besides) an
	// extended resource.
	DRADriverAnnotation = CapacityAnnotationPrefix + "dra-driver"
	// LabelsAnnotation is "key=value,key=value"; TaintsAnnotation is
	// "key=value:Effect,key:Effect".
	LabelsAnnotation = CapacityAnnotationPrefix + "labels"
	TaintsAnnotation = CapacityAnnotationPrefix + "taints"

	defaultMaxPods = 110
)

// TemplateNodeInfo describes the group's next node in three layers, each
// over the one before, as upstream builds it:
//   - the infrastructure machine template's status.capacity and
//     status.nodeInfo (Cluster API's opt-in contract for autoscaling from
//     zero), with the machine template's labels that Cluster API copies to
//     nodes and its taints;
//   - upstream's capacity annotations, which win over the infrastructure's
//     figures, and the labels and taints annotations;
//   - a Ready, schedulable node the group already has, whose labels, taints
//     and resources are what the next one will have (upstream's core prefers
//     such a node to any provider template).
//
// Without cpu and memory from the first two, and no node to copy, it returns
// cloudprovider.ErrNotImplemented: the group cannot scale from zero.
func (g *nodeGroup) TemplateNodeInfo() (*cloudprovider.NodeInfo, error) {
	if node := g.existingNode(); node != nil {
		return &cloudprovider.NodeInfo{Node: sanitizedCopy(node, g.templateName())}, nil
	}
	a := g.obj.GetAnnotations()
	// With cpu and memory annotated the group is described without the
	// infrastructure template: it is used when its kind's informer has
	// synced, never waited for.
	annotated := a[CPUAnnotation] != "" && a[MemoryAnnotation] != ""
	capacity, system := g.infrastructureCapacity(!annotated)
	if err := annotatedCapacity(a, capacity); err != nil {
		return nil, fmt.Errorf("%s: %w", g.id, err)
	}
	_, hasCPU := capacity[corev1.ResourceCPU]
	_, hasMemory := capacity[corev1.ResourceMemory]
	if !hasCPU || !hasMemory {
		return nil, fmt.Errorf("%s: scale from zero needs cpu and memory in the infrastructure machine template's status.capacity or the %s and %s annotations: %w",
			g.id, CPUAnnotation, MemoryAnnotation, cloudprovider.ErrNotImplemented)
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = *resource.NewQuantity(defaultMaxPods, resource.DecimalSI)
	}

	name := g.templateName()
	labels := map[string]string{
		corev1.LabelOSStable:   system.OperatingSystem,
		corev1.LabelArchStable: system.Architecture,
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
			NodeInfo:    system,
		},
	}
	slices, err := annotatedSlices(a, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.id, err)
	}
	return &cloudprovider.NodeInfo{Node: node, ResourceSlices: slices}, nil
}

// annotatedSlices are the ResourceSlices that upstream's dra-driver and
// gpu-count annotations describe for the node called node, as upstream
// builds them: one slice holding a pool of the node's own, named after it, of
// gpu-count devices gpu-0, gpu-1, ..., each with the string attribute type
// "gpu". None without a driver or without GPUs. The count is already
// validated (annotatedCapacity); one slice holds at most 128 devices.
func annotatedSlices(a map[string]string, node string) ([]*resourcev1.ResourceSlice, error) {
	driver := a[DRADriverAnnotation]
	if driver == "" || a[GPUCountAnnotation] == "" {
		return nil, nil
	}
	if errs := content.IsDNS1123Subdomain(driver); len(errs) > 0 || len(driver) > resourcev1.DriverNameMaxLength {
		return nil, fmt.Errorf("annotation %s: %q is not a driver name such as gpu.example.com", DRADriverAnnotation, driver)
	}
	n, err := strconv.ParseInt(a[GPUCountAnnotation], 10, 64)
	if err != nil || n <= 0 {
		return nil, nil
	}
	if n > resourcev1.ResourceSliceMaxDevices {
		return nil, fmt.Errorf("annotation %s: %d devices of driver %s are more than one ResourceSlice holds (%d)",
			GPUCountAnnotation, n, driver, resourcev1.ResourceSliceMaxDevices)
	}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": {StringValue: ptr.To("gpu")}},
		})
	}
	return []*resourcev1.ResourceSlice{slice}, nil
}

func (g *nodeGroup) templateName() string {
	name := g.name
	if len(name) > 54 {
		name = name[:54]
	}
	return name + "-template"
}

// annotatedCapacity sets the annotated resources on capacity, over what is
// there.
func annotatedCapacity(a map[string]string, capacity corev1.ResourceList) error {
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
			return fmt.Errorf("annotation %s: %q is not a non-negative quantity", r.annotation, text)
		}
		capacity[r.name] = q
	}
	if text := a[MaxPodsAnnotation]; text != "" {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("annotation %s: %q is not a non-negative integer", MaxPodsAnnotation, text)
		}
		capacity[corev1.ResourcePods] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if text := a[GPUCountAnnotation]; text != "" {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("annotation %s: %q is not a non-negative integer", GPUCountAnnotation, text)
		}
		// Upstream adds the GPUs only when the annotations name their resource;
		// a count alone is left out and the group still scales from zero.
		gpuType := a[GPUTypeAnnotation]
		if gpuType != "" && len(content.IsLabelKey(gpuType)) > 0 {
			return fmt.Errorf("annotation %s: %q is not a resource name such as nvidia.com/gpu", GPUTypeAnnotation, gpuType)
		}
		if n > 0 && gpuType != "" {
			capacity[corev1.ResourceName(gpuType)] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return nil
}

// infrastructureCapacity reads the infrastructure machine template's
// status.capacity and status.nodeInfo, waiting for its kind's informer when
// wait is set. A template that cannot be read, or a quantity that does not
// parse, contributes nothing: the annotations may still describe the group.
func (g *nodeGroup) infrastructureCapacity(wait bool) (corev1.ResourceList, corev1.NodeSystemInfo) {
	capacity := corev1.ResourceList{}
	system := corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux"}
	ref, found, _ := unstructured.NestedStringMap(g.obj.Object, "spec", "template", "spec", "infrastructureRef")
	if !found || ref["kind"] == "" || ref["name"] == "" || g.p.informers == nil {
		return capacity, system
	}
	logger := klog.FromContext(g.p.ctx).WithValues("nodeGroup", g.id)
	template, err := g.p.informers.template(refGroup(ref), ref["kind"], g.namespace, ref["name"], wait)
	if err != nil || template == nil {
		if err != nil {
			logger.V(4).Info("No capacity from the infrastructure machine template", "reason", err.Error())
		}
		return capacity, system
	}
	fromStatus, _, _ := unstructured.NestedStringMap(template.Object, "status", "capacity")
	for name, text := range fromStatus {
		q, err := resource.ParseQuantity(text)
		if err != nil || q.Sign() < 0 {
			logger.V(2).Info("Ignoring a capacity of the infrastructure machine template", "resource", name, "value", text)
			continue
		}
		capacity[corev1.ResourceName(name)] = q
	}
	info, _, _ := unstructured.NestedStringMap(template.Object, "status", "nodeInfo")
	if arch := info["architecture"]; arch != "" && len(content.IsLabelValue(arch)) == 0 {
		system.Architecture = arch
	}
	if os := info["operatingSystem"]; os != "" && len(content.IsLabelValue(os)) == 0 {
		system.OperatingSystem = os
	}
	return capacity, system
}

// existingNode is the example node of the group (nodetemplate.Example)
// among the nodes of its machines that are not being deleted; nil when none is
// a good example, or without a node lister.
func (g *nodeGroup) existingNode() *corev1.Node {
	if g.p.nodes == nil {
		return nil
	}
	var nodes []*corev1.Node
	for _, m := range g.machines {
		if name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); name != "" && !isDeleting(m) {
			if n, err := g.p.nodes.Get(name); err == nil {
				nodes = append(nodes, n)
			}
		}
	}
	if n, good := nodetemplate.Example(nodes); good {
		return n
	}
	return nil
}

// sanitizedCopy is node as the template of a new node called name: its
// labels, taints (sanitized as every template's, nodetemplate.FromNode) and
// resources, without anything else that belongs to that one node. The core
// sanitizes the taints again with the autoscaler's --startup-taint and
// --status-taint flags.
func sanitizedCopy(node *corev1.Node, name string) *corev1.Node {
	t := nodetemplate.FromNode(node, name, nodetemplate.TaintConfig{})
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: t.Labels},
		Spec:       corev1.NodeSpec{Taints: t.Spec.Taints},
		Status: corev1.NodeStatus{
			Capacity:    t.Status.Capacity,
			Allocatable: t.Status.Allocatable,
			Phase:       corev1.NodeRunning,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
			NodeInfo:    t.Status.NodeInfo,
		},
	}
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
