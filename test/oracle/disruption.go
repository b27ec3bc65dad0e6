package oracle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

const (
	// toBeDeletedTaint is the taint the autoscaler puts on a node it drains
	// for scale-down (upstream's key).
	toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
	// evictionByEvictionAPI is the DisruptionTarget reason the API server sets
	// on a pod evicted through the Eviction API.
	evictionByEvictionAPI = "EvictionByEvictionAPI"
)

// classifyDisruptionLocked judges why a pod is disrupted, once, when its
// DisruptionTarget condition first appears: the scheduler's preemption is
// judged as a reclaim when the pod stops (stoppedLocked), an eviction from a
// node marked for deletion is a scale-down drain, anything else is a
// violation.
func (o *Oracle) classifyDisruptionLocked(st *podState, pod *corev1.Pod) {
	if st.disruption != "" {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			st.disruption = c.Reason
		}
	}
	switch {
	case st.disruption == "":
	case st.disruption == corev1.PodReasonPreemptionByScheduler:
		st.leafRival = o.pendingRivalLocked(pod)
	case st.disruption == evictionByEvictionAPI && o.marked[pod.Spec.NodeName]:
		o.counts.Drained++
	case st.disruption == evictionByEvictionAPI:
		// Judged when the node is seen marked, or at the verdict.
		o.unmarkedEvictions[pod.Spec.NodeName] = append(o.unmarkedEvictions[pod.Spec.NodeName],
			fmt.Sprintf("pod %s/%s on %s evicted (%s), and the node was never marked for scale-down: neither a reclaim nor a scale-down drain",
				pod.Namespace, pod.Name, pod.Spec.NodeName, st.disruption))
	default:
		o.violateLocked(fmt.Sprintf("pod %s/%s on %s disrupted for %s, neither a reclaim nor a scale-down drain",
			pod.Namespace, pod.Name, pod.Spec.NodeName, st.disruption))
	}
}
