package devices

import (
	corev1 "k8s.io/api/core/v1"
)

// WithDevices is node as quotas on node capacity count it: its
// status.capacity plus the devices its ResourceSlices publish (a Count's
// Resources). A device-class name is added as counted. An extended resource
// name a class serves is added only when the node's capacity lacks it: the
// scheduler serves an extended resource from DRA devices only on nodes where
// no device plugin advertises it, so a node has it once, from one source.
// When nothing is added, node itself is returned; otherwise a copy whose
// capacity is a new map (labels and everything else shared, so neither may be
// mutated).
func WithDevices(node *corev1.Node, devices corev1.ResourceList) *corev1.Node {
	if node == nil || len(devices) == 0 {
		return node
	}
	var capacity corev1.ResourceList
	for name, q := range devices {
		if _, has := node.Status.Capacity[name]; has {
			continue
		}
		if capacity == nil {
			capacity = make(corev1.ResourceList, len(node.Status.Capacity)+len(devices))
			for n, c := range node.Status.Capacity {
				capacity[n] = c
			}
		}
		capacity[name] = q
	}
	if capacity == nil {
		return node
	}
	counted := *node
	counted.Status.Capacity = capacity
	return &counted
}
