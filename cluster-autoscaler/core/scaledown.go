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
		Now:     lc.Now,
		Nodes:   lc.Nodes,
		Pods:    bound,
		Targets: map[string]int{},
		GroupOf: func(n *corev1.Node) cloudprovider.NodeGroup {
			g, err := a.Provider.NodeGroupForNode(n)
			if err != nil {
				return nil
			}
			return g
		},
		MayRemove: !scaledUp &&
			lc.Now.Sub(a.registry.LastScaleUp()) >= a.opts.ScaleDownDelayAfterAdd &&
			lc.Now.Sub(a.lastScaleDownFailure) >= a.opts.ScaleDownDelayAfterFailure,
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
	start := time.Now()
	plan, err := a.ScaleDownPlanner.Plan(ctx, in)
	if err != nil {
		return nil, err
	}
	status := &processors.ScaleDownStatus{Unneeded: plan.Unneeded, Kept: plan.Kept}
	for _, r := range plan.Removals {
		if err := a.ScaleDownActuator.Remove(ctx, r); err != nil {
			logger.Error(err, "Scale-down failed")
			a.lastScaleDownFailure = lc.Now
			status.Failed = append(status.Failed, processors.FailedRemoval{NodeRemoval: r, Err: err})
			a.Metrics.FailedScaleDowns.Inc()
			continue
		}
		status.Removed = append(status.Removed, r)
		a.Metrics.ScaledDownNodes.Inc()
	}
	unneeded := 0
	for _, n := range plan.Unneeded {
		unneeded += n
	}
	a.Metrics.UnneededNodes.Set(float64(unneeded))
	if len(status.Removed) > 0 {
		a.Metrics.LastActivity.WithLabelValues("scaleDown").Set(float64(lc.Now.Unix()))
	}
	a.Metrics.LoopDuration.WithLabelValues("scaleDown").Observe(time.Since(start).Seconds())
	for _, p := range a.ScaleDownStatusProcessors {
		p.ProcessScaleDown(ctx, lc, status)
	}
	return plan.Unneeded, nil
}
