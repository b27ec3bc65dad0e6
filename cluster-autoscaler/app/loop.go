package app

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/quota/resources"
)

// recentUnschedulable is how recently a pod must have been marked
// unschedulable for it to start a loop early, as upstream's pod observer.
const recentUnschedulable = 10 * time.Second

// Run loops until ctx ends; a failed loop is logged and the next one runs on
// schedule. Without --frequent-loops-enabled the next loop starts
// --scan-interval after the last one ended. With it (upstream's default), the
// next loop starts at once after a loop that scaled up or removed a node, and
// otherwise as soon as a pod is newly marked unschedulable, or after
// --scan-interval at the latest.
func (a *Autoscaler) Run(ctx context.Context) {
	a.health.startMonitoring()
	logger := klog.FromContext(ctx)
	for {
		if err := a.RunOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Autoscaler loop failed")
		}
		if a.opts.FrequentLoopsEnabled && a.core.Productive() && ctx.Err() == nil {
			logger.V(4).Info("Autoscaler loop triggered immediately after a scale-up or a node removal")
			continue
		}
		var unschedulable <-chan struct{}
		if a.opts.FrequentLoopsEnabled {
			unschedulable = a.unschedulable
		}
		timer := time.NewTimer(a.opts.ScanInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			if err := a.provider.Cleanup(); err != nil {
				logger.Error(err, "Cleaning up the cloud provider")
			}
			return
		case <-timer.C:
		case <-unschedulable:
			timer.Stop()
			logger.V(4).Info("Autoscaler loop triggered by an unschedulable pod")
		}
	}
}

// watchUnschedulable signals on a one-slot channel whenever a pod is added
// or updated that the scheduler marked unschedulable in the last
// recentUnschedulable, as upstream's UnschedulablePodObserver.
func watchUnschedulable(pods cache.SharedIndexInformer) (<-chan struct{}, error) {
	signal := make(chan struct{}, 1)
	notify := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && recentlyUnschedulable(pod, time.Now()) {
			select {
			case signal <- struct{}{}:
			default:
			}
		}
	}
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
	})
	return signal, err
}

func recentlyUnschedulable(pod *corev1.Pod, now time.Time) bool {
	if pod.Spec.NodeName != "" || resources.PodFinished(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				!c.LastTransitionTime.Add(recentUnschedulable).Before(now)
		}
	}
	return false
}
