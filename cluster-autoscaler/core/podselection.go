package core

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/quota/resources"
)

// PodScaleUpDelayAnnotation is upstream's per-pod --new-pod-scale-up-delay: a
// pod may ask to wait longer than the flag says, never shorter.
const PodScaleUpDelayAnnotation = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"

// unschedulable reports whether a pending pod counts for scale-up, as upstream
// decides: its scheduler is one of --allowed-scheduler-names (when set); the
// scheduler gave up on it for now, or it belongs to a scheduler of
// --bypassed-scheduler-names (counted at once, without waiting for that
// scheduler's verdict); it is not expendable; and it is older than its scale-up
// delay. A pod nominated to a node is waiting for the pods its preemption (or
// reclaim) evicts: a new node would be bought for nothing.
func (a *Autoscaler) unschedulable(ctx context.Context, p *corev1.Pod, now time.Time) bool {
	if p.DeletionTimestamp != nil || resources.PodFinished(p) {
		return false
	}
	if p.Status.NominatedNodeName != "" || scaledown.IsExpendable(p, a.opts.ExpendablePodsPriorityCutoff) {
		return false
	}
	if now.Sub(p.CreationTimestamp.Time) <= a.scaleUpDelay(ctx, p) {
		return false
	}
	if len(a.opts.AllowedSchedulerNames) > 0 && !slices.Contains(a.opts.AllowedSchedulerNames, p.Spec.SchedulerName) {
		return false
	}
	return a.bypassed[p.Spec.SchedulerName] || markedUnschedulable(p)
}

// markedUnschedulable reports whether the scheduler gave up on the pod for now.
func markedUnschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// scaleUpDelay is --new-pod-scale-up-delay, or the pod's longer
// PodScaleUpDelayAnnotation; an annotation that does not parse, or asks for
// less, is logged and ignored, as upstream does.
func (a *Autoscaler) scaleUpDelay(ctx context.Context, p *corev1.Pod) time.Duration {
	delay := a.opts.NewPodScaleUpDelay
	raw, ok := p.Annotations[PodScaleUpDelayAnnotation]
	if !ok {
		return delay
	}
	asked, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Ignoring the pod's scale-up delay annotation", "pod", klog.KObj(p), "annotation", PodScaleUpDelayAnnotation)
	case asked < delay:
		klog.FromContext(ctx).Error(nil, "Ignoring a pod scale-up delay shorter than --new-pod-scale-up-delay", "pod", klog.KObj(p),
			"annotation", PodScaleUpDelayAnnotation, "asked", asked, "delay", delay)
	default:
		delay = asked
	}
	return delay
}
