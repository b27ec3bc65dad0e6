package resources

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests is what a pod is charged: the effective requests the scheduler
// itself uses, so that quota and node fit never disagree about one pod. The
// helper accounts for init containers, restartable (sidecar) init containers,
// pod-level resources and overhead; the options mirror the kube-scheduler's
// defaults at v1.37 (in-place resize is GA, so allocated status resources win
// during a resize, and pod-level resources are honoured).
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
	})
}

// PodFinished says whether a pod has run to completion (Succeeded or Failed):
// such a pod holds none of its node's resources and no quota, even while it
// stays bound to the node.
func PodFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
