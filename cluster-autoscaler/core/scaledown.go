package core

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/processors"
)

// scaleDown removes unneeded nodes, unless this loop scaled up or a delay after
// a scale-up or a failed removal is running; unneeded nodes are still tracked
// meanwhile, so the unneeded time does not start over.
func (a *Autoscaler) scaleDown(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, bound []*corev1.Pod, scaledUp bool) (map[string]int, error) {
	if a.ScaleDownPlanner == nil {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	in := scaledown.Input{
		Now:         lc.Now,
		Nodes:       lc.Nodes,
		Pods:        bound,
		Controllers: a.Controllers,
		Targets:     map[string]int{},
		NodeInfos:   a.nodeInfos,
		GroupOf: func(n *corev1.Node) cloudprovider.NodeGroup {
			g, err := a.Provider.NodeGroupForNode(n)
			if err != nil {
				return nil
			}
			return g
		},
		// With --scale-down-delay-type-local the delays hold each group on
		// its own; a loop that scaled up removes nothing either way, as
		// upstream.
		MayRemove: !scaledUp && (a.opts.ScaleDownDelayTypeLocal ||
			a.pastDelays(lc.Now, a.registry.LastScaleUp(), a.lastScaleDownFailure, a.lastScaleDownDelete)),
	}
	if a.opts.ScaleDownDelayTypeLocal {
		in.GroupInDelay = func(id string) bool {
			return !a.pastDelays(lc.Now, a.registry.LastScaleUpOf(id), a.groupScaleDownFailure[id], a.groupScaleDownDelete[id])
		}
	}
	for _, gs := range state.Groups {
		in.Targets[gs.Group.Id()] = gs.Target
	}
	if a.PDBs != nil {
		pdbs, err := a.PDBs.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
		}
		in.PDBs = pdbs
	}
	if a.RootMin != nil {
		in.RootMin = a.RootMin()
	}
	findStart := time.Now()
	plan, err := a.ScaleDownPlanner.Plan(ctx, in)
	if err != nil {
		return nil, err
	}
	a.Metrics.ObserveDuration(metrics.FindUnneeded, findStart)
	unneeded := 0
	for _, n := range plan.Unneeded {
		unneeded += n
	}
	a.Metrics.UpdateUnneeded(unneeded, unremovableByReason(plan.Kept))
	a.Metrics.SetScaleDownInCooldown(!in.MayRemove)
	for _, k := range plan.Kept {
		for _, reason := range minimumLimitReasons(k.Reason) {
			a.Metrics.RegisterSkippedScaleDown(reason)
		}
	}
	status := &processors.ScaleDownStatus{Unneeded: plan.Unneeded, Kept: plan.Kept}
	removeStart := time.Now()
	if in.MayRemove {
		a.Metrics.SetLastActivity(metrics.ScaleDown, removeStart)
	}
	removeErrs := a.ScaleDownActuator.RemoveAll(ctx, plan.Removals)
	for i, r := range plan.Removals {
		if err := removeErrs[i]; err != nil {
			logger.Error(err, "Scale-down failed")
			a.lastScaleDownFailure = lc.Now
			a.groupScaleDownFailure[r.GroupID] = lc.Now
			status.Failed = append(status.Failed, processors.FailedRemoval{NodeRemoval: r, Err: err})
			a.Metrics.RegisterFailedScaleDown()
			continue
		}
		a.lastScaleDownDelete = lc.Now
		a.groupScaleDownDelete[r.GroupID] = lc.Now
		status.Removed = append(status.Removed, r)
		a.productive = true
		reason := metrics.ScaleDownUnderutilized
		if len(r.Evicted) == 0 {
			reason = metrics.ScaleDownEmpty
		}
		a.Metrics.RegisterScaleDown(reason, metrics.GPUOf(r.Node, nil))
	}
	if in.MayRemove {
		a.Metrics.ObserveDuration(metrics.ScaleDown, removeStart)
	}
	a.updateSoftTaints(ctx, lc.Nodes, plan.UnneededNodes, lc.Now)
	if a.opts.NodeRemovalLatencyTracking {
		a.observeRemovalLatency(plan, status.Removed, lc.Now)
	}
	if a.opts.MaxNodeSkipEvalTimeTracker {
		a.observeSkippedEval(plan.Skipped, lc.Now)
	}
	for _, p := range a.ScaleDownStatusProcessors {
		p.ProcessScaleDown(ctx, lc, status)
	}
	return plan.Unneeded, nil
}

// pastDelays reports whether the --scale-down-delay-after-add, -failure and
// -delete delays started at the given times have all run out at now.
func (a *Autoscaler) pastDelays(now, scaleUp, failure, deleted time.Time) bool {
	return now.Sub(scaleUp) >= a.opts.ScaleDownDelayAfterAdd &&
		now.Sub(failure) >= a.opts.ScaleDownDelayAfterFailure &&
		now.Sub(deleted) >= a.opts.ScaleDownDelayAfterDelete
}
