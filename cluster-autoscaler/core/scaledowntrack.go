package core

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/processors"
)

// removalLatency is upstream's --node-removal-latency-tracking-enabled: for
// each unneeded node, since when, and what last held it once its unneeded
// time had passed.
type removalLatency struct {
	since  map[string]time.Time
	reason map[string]string
}

// observe records the nodes that stopped being unneeded (needed again) and
// those removed: how long past the unneeded time they took, when that is
// positive, as upstream.
func (a *Autoscaler) observeRemovalLatency(plan scaledown.Plan, removed []processors.NodeRemoval, now time.Time) {
	t := &a.latency
	if t.since == nil {
		t.since, t.reason = map[string]time.Time{}, map[string]string{}
	}
	record := func(name string, deleted bool) {
		latency := now.Sub(t.since[name]) - a.opts.ScaleDownUnneededTime
		reason := t.reason[name]
		if reason == "" {
			reason = "none"
		}
		if latency > 0 {
			a.Metrics.ObserveNodeRemovalLatency(deleted, reason, latency)
		}
		delete(t.since, name)
		delete(t.reason, name)
	}
	for _, r := range removed {
		if _, ok := t.since[r.Node.Name]; ok {
			record(r.Node.Name, true)
		}
	}
	for name := range t.since {
		if _, ok := plan.UnneededNodes[name]; !ok {
			record(name, false)
		}
	}
	for name, since := range plan.UnneededNodes {
		if _, ok := t.since[name]; !ok {
			t.since[name] = since
		}
	}
	for _, k := range plan.Kept {
		if _, ok := t.since[k.Node.Name]; ok {
			t.reason[k.Node.Name] = unremovableReason(k.Reason)
		}
	}
}

// observeSkippedEval is upstream's --max-node-skip-eval-time-tracker-enabled:
// the longest a node has been left unchecked by scale-down loops in a row.
func (a *Autoscaler) observeSkippedEval(skipped []string, now time.Time) {
	next := make(map[string]time.Time, len(skipped))
	var longest time.Duration
	for _, name := range skipped {
		since, ok := a.skippedSince[name]
		if !ok {
			since = now
		}
		next[name] = since
		longest = max(longest, now.Sub(since))
	}
	a.skippedSince = next
	a.Metrics.SetMaxNodeSkipEvalDuration(longest)
}

// updateSoftTaints marks unneeded nodes with upstream's
// DeletionCandidateOfClusterAutoscaler PreferNoSchedule taint and unmarks
// the others, within --max-bulk-soft-taint-count and --max-bulk-soft-taint-time;
// with a count of 0, as upstream, it only clears stale taints at the first
// loop.
func (a *Autoscaler) updateSoftTaints(ctx context.Context, nodes []*corev1.Node, unneeded map[string]time.Time, now time.Time) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer a.Metrics.ObserveDuration(metrics.ScaleDownSoftTaint, start)
	if a.opts.MaxBulkSoftTaintCount == 0 {
		if !a.softTaintsCleaned {
			a.softTaintsCleaned = true
			if err := scaledown.CleanSoftTaints(ctx, a.ScaleDownActuator.Client, nodes, a.opts.NodeDeletionCandidateTTL, now); err != nil {
				logger.Error(err, "Cleaning stale DeletionCandidate taints")
			}
		}
		return
	}
	var managed []*corev1.Node
	for _, n := range nodes {
		if g, err := a.Provider.NodeGroupForNode(n); err == nil && g != nil {
			managed = append(managed, n)
		}
	}
	budget := scaledown.SoftTaintBudget{Count: a.opts.MaxBulkSoftTaintCount, Time: a.opts.MaxBulkSoftTaintTime}
	if _, err := scaledown.UpdateSoftTaints(ctx, a.ScaleDownActuator.Client, managed, unneeded, budget); err != nil {
		logger.Error(err, "Soft tainting unneeded nodes")
	}
}
