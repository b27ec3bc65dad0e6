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
//
// A pod whose status reports no resources (every pending pod) is computed
// from its spec alone: the status-aware computation would aggregate the spec
// three times (spec, allocated, actuated) and take their maximum, the spec,
// at three times the cost. The commonest such pod, with neither pod-level
// requests nor sidecars, is summed by specRequests into one list.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	fromSpec := requestsFromSpec(pod)
	if fromSpec && pod.Spec.Resources == nil && !hasSidecar(pod) {
		return specRequests(pod)
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: !fromSpec,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
	})
}

// specRequests is what the helper computes from the spec of a pod without
// pod-level requests or sidecars: the larger, per resource, of the
// containers' sum and each init container's requests, plus the overhead.
// The helper builds a list per container and per init container on the way;
// this builds only the result, a fraction of the allocations, for the pods
// that every scheduling attempt and every autoscaler loop charge. The
// property tests hold it to the helper on random pods.
func specRequests(pod *corev1.Pod) corev1.ResourceList {
	size := len(pod.Spec.Overhead)
	for i := range pod.Spec.Containers {
		size = max(size, len(pod.Spec.Containers[i].Resources.Requests))
	}
	out := make(corev1.ResourceList, size)
	for i := range pod.Spec.Containers {
		addTo(out, pod.Spec.Containers[i].Resources.Requests)
	}
	for i := range pod.Spec.InitContainers {
		for name, q := range pod.Spec.InitContainers[i].Resources.Requests {
			if have, ok := out[name]; !ok || q.Cmp(have) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	addTo(out, pod.Spec.Overhead)
	return out
}

// addTo adds list to sum. An amount is copied deeply before it is first
// stored: Add changes a large amount's inf.Dec in place, which would otherwise
// be the pod's own.
func addTo(sum, list corev1.ResourceList) {
	for name, q := range list {
		if have, ok := sum[name]; ok {
			have.Add(q)
			sum[name] = have
		} else {
			sum[name] = q.DeepCopy()
		}
	}
}

func hasSidecar(pod *corev1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if restartable(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// requestsFromSpec reports whether PodRequests reads nothing of the pod's
// status: it reports no allocated or actuated resources, for the pod or any
// container, and no infeasible resize (which drops the spec's requests).
func requestsFromSpec(pod *corev1.Pod) bool {
	if pod.Status.Resources != nil || pod.Status.AllocatedResources != nil {
		return false
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range statuses {
			if statuses[i].AllocatedResources != nil || statuses[i].Resources != nil {
				return false
			}
		}
	}
	return !resourcehelper.IsPodResizeInfeasible(pod)
}

// SameRequests reports whether PodRequests(a) equals PodRequests(b) because
// everything it reads is equal: both are computed from their spec alone, and
// the containers', init containers' and pod-level requests, the init
// containers' restart policies and the overhead are the same. It is the cheap
// check, a few comparisons, that lets a caller keep requests it computed for
// an earlier version of the same pod; false says only "compute again".
func SameRequests(a, b *corev1.Pod) bool {
	if !requestsFromSpec(a) || !requestsFromSpec(b) ||
		!sameContainerRequests(a.Spec.Containers, b.Spec.Containers) ||
		!sameContainerRequests(a.Spec.InitContainers, b.Spec.InitContainers) ||
		!sameList(a.Spec.Overhead, b.Spec.Overhead) {
		return false
	}
	ra, rb := a.Spec.Resources, b.Spec.Resources
	if ra == nil || rb == nil {
		return ra == nil && rb == nil
	}
	return sameList(ra.Requests, rb.Requests)
}

func sameContainerRequests(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if restartable(&a[i]) != restartable(&b[i]) || !sameList(a[i].Resources.Requests, b[i].Resources.Requests) {
			return false
		}
	}
	return true
}

func restartable(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// sameList compares amounts, not their formatting: 1 and 1000m are the same.
func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// PodFinished says whether a pod has run to completion (Succeeded or Failed):
// such a pod holds none of its node's resources and no quota, even while it
// stays bound to the node.
func PodFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
