package elastic

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// Charged says whether a pod counts against the tree: assigned to a node and
// not finished. The scheduler, the autoscaler and kubectl-quota all count with
// it, so a pod is charged in all three or in none. A charged pod on its way
// out (see Leaving) still holds its quota until it is gone.
func Charged(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.NodeName != "" && !resources.PodFinished(pod)
}

// Leaving says whether a pod is on its way out: it has a deletion timestamp,
// or a true DisruptionTarget condition, which whoever evicts a pod sets before
// deleting it. A charged pod that is leaving is counted by admission and not
// by the guarantees of reclaim and preemption (see Tree.KeepsGuarantees).
func Leaving(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || disruptionTarget(pod)
}

func disruptionTarget(pod *corev1.Pod) bool {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
