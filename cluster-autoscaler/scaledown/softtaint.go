package scaledown

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// DeletionCandidateSince is when a node was marked as a deletion candidate,
// from its taint.
func DeletionCandidateSince(n *corev1.Node) (time.Time, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key != nodetemplate.DeletionCandidateTaint {
			continue
		}
		unix, err := strconv.ParseInt(t.Value, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		return time.Unix(unix, 0), true
	}
	return time.Time{}, false
}

// SoftTaintBudget is --max-bulk-soft-taint-count and --max-bulk-soft-taint-time:
// how many nodes one loop may taint or untaint, and for how long.
type SoftTaintBudget struct {
	Count int
	Time  time.Duration
}

// UpdateSoftTaints gives unneeded nodes the DeletionCandidate taint and takes
// it off the other nodes, within budget, as upstream's
// UpdateSoftDeletionTaints: untainting first, and never a node being
// deleted. It returns how many nodes it changed; nodes left over by the
// budget are done in a later loop.
func UpdateSoftTaints(ctx context.Context, client kubernetes.Interface, nodes []*corev1.Node, unneeded map[string]time.Time, budget SoftTaintBudget) (int, error) {
	start, changed, skipped := time.Now(), 0, 0
	var errs []error
	apply := func(n *corev1.Node, on bool) {
		if changed >= budget.Count || time.Since(start) >= budget.Time {
			skipped++
			return
		}
		changed++
		if err := setSoftTaint(ctx, client, n.Name, on); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
		}
	}
	for _, on := range []bool{false, true} {
		for _, n := range nodes {
			_, isUnneeded := unneeded[n.Name]
			_, tainted := DeletionCandidateSince(n)
			if nodetemplate.BeingDeleted(n) || isUnneeded != on || tainted == on {
				continue
			}
			apply(n, on)
		}
	}
	if skipped > 0 {
		klog.FromContext(ctx).V(4).Info("Soft taints left for a later loop: --max-bulk-soft-taint-count or --max-bulk-soft-taint-time reached", "nodes", skipped)
	}
	if len(errs) > 0 {
		return changed, fmt.Errorf("updating DeletionCandidate taints: %v", errs)
	}
	return changed, nil
}

// CleanSoftTaints takes the DeletionCandidate taint off every node whose
// taint is older than ttl (every node with ttl 0), as upstream does at start
// when soft tainting is off.
func CleanSoftTaints(ctx context.Context, client kubernetes.Interface, nodes []*corev1.Node, ttl time.Duration, now time.Time) error {
	for _, n := range nodes {
		since, ok := DeletionCandidateSince(n)
		if !ok && !nodetemplate.HasTaint(n, nodetemplate.DeletionCandidateTaint) {
			continue
		}
		if ok && ttl > 0 && since.Add(ttl).After(now) {
			continue
		}
		if err := setSoftTaint(ctx, client, n.Name, false); err != nil {
			return fmt.Errorf("cleaning the DeletionCandidate taint of node %s: %w", n.Name, err)
		}
	}
	return nil
}

func setSoftTaint(ctx context.Context, client kubernetes.Interface, name string, on bool) error {
	return setNodeTaint(ctx, client, name, nodetemplate.DeletionCandidateTaint, corev1.TaintEffectPreferNoSchedule, on, false)
}

// setNodeTaint adds (on) or removes one of the autoscaler's taints, whose
// value is the time it was set, and with cordon sets spec.unschedulable to
// on as well; a node already so is left alone.
func setNodeTaint(ctx context.Context, client kubernetes.Interface, name, key string, effect corev1.TaintEffect, on, cordon bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if nodetemplate.HasTaint(node, key) == on && (!cordon || node.Spec.Unschedulable == on) {
			return nil
		}
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != key {
				taints = append(taints, t)
			}
		}
		if on {
			taints = append(taints, corev1.Taint{Key: key, Value: strconv.FormatInt(time.Now().Unix(), 10), Effect: effect})
		}
		node.Spec.Taints = taints
		if cordon {
			node.Spec.Unschedulable = on
		}
		_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}
