package scaledown

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
)

// Actuator removes the nodes a plan chose.
type Actuator struct {
	Client   kubernetes.Interface
	Provider cloudprovider.CloudProvider
	// MaxGracefulTermination bounds how long a drain waits for pods to go.
	MaxGracefulTermination time.Duration
}

// Remove taints the node so nothing new lands on it, evicts its pods through the
// Eviction API (so PodDisruptionBudgets are honoured), waits for them to go and
// deletes the node's instance. When the drain fails the taint is rolled back and
// the node stays.
func (a *Actuator) Remove(ctx context.Context, r processors.NodeRemoval) error {
	logger := klog.FromContext(ctx).WithValues("node", r.Node.Name, "nodeGroup", r.GroupID)
	if err := a.setTaint(ctx, r.Node.Name, true); err != nil {
		return fmt.Errorf("tainting node %s: %w", r.Node.Name, err)
	}
	if err := a.drain(ctx, r.Evicted); err != nil {
		if rbErr := a.setTaint(ctx, r.Node.Name, false); rbErr != nil {
			logger.Error(rbErr, "Rolling back the ToBeDeleted taint")
		}
		return fmt.Errorf("draining node %s: %w", r.Node.Name, err)
	}
	group, err := a.Provider.NodeGroupForNode(r.Node)
	if err != nil || group == nil {
		_ = a.setTaint(ctx, r.Node.Name, false)
		return fmt.Errorf("node %s has no node group anymore: %v", r.Node.Name, err)
	}
	if err := group.DeleteNodes([]*corev1.Node{r.Node}); err != nil {
		_ = a.setTaint(ctx, r.Node.Name, false)
		return fmt.Errorf("deleting node %s from node group %s: %w", r.Node.Name, r.GroupID, err)
	}
	logger.Info("Removed node", "evictedPods", len(r.Evicted))
	return nil
}

func (a *Actuator) drain(ctx context.Context, pods []*corev1.Pod) error {
	grace := int64(a.MaxGracefulTermination.Seconds())
	for _, pod := range pods {
		eviction := &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace},
		}
		if pod.Spec.TerminationGracePeriodSeconds != nil && *pod.Spec.TerminationGracePeriodSeconds < grace {
			eviction.DeleteOptions.GracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
		}
		err := a.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, eviction)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	// The pods must be gone, not merely terminating, before the node goes.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, a.MaxGracefulTermination+5*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, pod := range pods {
			got, err := a.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && got.UID != pod.UID) {
				continue
			}
			if err != nil {
				return false, err
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for evicted pods to terminate: %w", err)
	}
	return nil
}

// setTaint adds or removes upstream's ToBeDeletedByClusterAutoscaler taint.
func (a *Actuator) setTaint(ctx context.Context, name string, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := a.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != ToBeDeletedTaint {
				taints = append(taints, t)
			}
		}
		if on {
			taints = append(taints, corev1.Taint{Key: ToBeDeletedTaint, Value: strconv.FormatInt(time.Now().Unix(), 10), Effect: corev1.TaintEffectNoSchedule})
		}
		node.Spec.Taints = taints
		_, err = a.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}
