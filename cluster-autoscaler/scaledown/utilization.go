package scaledown

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/quota/resources"
)

// utilization is upstream's: the larger of the cpu and memory requested on
// the node, or for a node with a GPU the GPU requested alone, over
// allocatable, with the GPU threshold. DaemonSet pods with
// --ignore-daemonsets-utilization, and mirror pods with
// --ignore-mirror-pods-utilization, count neither in the requests nor in
// allocatable. A GPU not allocatable yet is 0, so such a node can go.
func utilization(node *corev1.Node, pods []*corev1.Pod, opts Options) (u, threshold float64) {
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	threshold = opts.UtilizationThreshold
	if gpu, ok := gpuResource(node); ok {
		names, threshold = []corev1.ResourceName{gpu}, opts.GPUUtilizationThreshold
	}
	for _, name := range names {
		allocatable := node.Status.Allocatable[name]
		if allocatable.IsZero() {
			continue
		}
		var requested, ignored int64
		for _, pod := range pods {
			if resources.PodFinished(pod) {
				continue
			}
			q := resources.PodRequests(pod)[name]
			if (opts.IgnoreDaemonSetsUtilization && isDaemonSetPod(pod)) || (opts.IgnoreMirrorPodsUtilization && isMirrorPod(pod)) {
				ignored += q.MilliValue()
				continue
			}
			requested += q.MilliValue()
		}
		if left := allocatable.MilliValue() - ignored; left > 0 {
			u = max(u, float64(requested)/float64(left))
		}
	}
	return u, threshold
}

// gpuResource is the GPU resource of a node upstream treats as a GPU node:
// one with a GPU allocatable, or labelled with a GPU type (then nvidia.com/gpu
// unless another is allocatable).
func gpuResource(node *corev1.Node) (corev1.ResourceName, bool) {
	for _, name := range metrics.GPUResourceNames {
		if q, ok := node.Status.Allocatable[name]; ok && !q.IsZero() {
			return name, true
		}
	}
	if _, ok := node.Labels[metrics.GPULabel]; ok {
		return metrics.GPUResourceNames[0], true
	}
	return "", false
}
