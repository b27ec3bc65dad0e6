package kwok

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node builds the Node of one of the group's instances. The provider's template
// and the backend's real nodes come from this one function, so that what the
// autoscaler simulates is what registers.
func (g *groupSpec) node(name, id string) *corev1.Node {
	labels := map[string]string{
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		// localcluster's kwok nodes carry it too; keep the two kinds alike.
		"type": "kwok",
	}
	for k, v := range g.labels {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = name
	labels[NodeGroupLabel] = g.name
	annotations := map[string]string{NodeAnnotation: nodeAnnotationValue}
	if devices := devicesAnnotation(g.devices); devices != "" {
		annotations[DevicesAnnotation] = devices
	}
	var taints []corev1.Taint
	if len(g.taints) > 0 {
		taints = append([]corev1.Taint(nil), g.taints...)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{ProviderID: id, Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    g.capacity.DeepCopy(),
			Allocatable: g.allocatable.DeepCopy(),
			Phase:       corev1.NodePending,
		},
	}
}

// templateNode is the group's node as the autoscaler simulates it: Ready, with a
// name no real instance gets (instance names end in "-" and 5 random
// characters).
func (g *groupSpec) templateNode() *corev1.Node {
	name := g.name + "-template"
	n := g.node(name, providerID(g.name, name))
	n.Status.Phase = corev1.NodeRunning
	n.Status.Conditions = []corev1.NodeCondition{{
		Type:   corev1.NodeReady,
		Status: corev1.ConditionTrue,
		Reason: "KubeletReady",
	}}
	return n
}
