package core

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/processors"
)

// scaleUpToMinSize grows every node group whose target is below its min size
// up to it, as upstream's --enforce-node-group-min-size: not a group that is
// unhealthy or backed off or has no template, and never past a limit (a
// CapacityQuota, --max-nodes-total, --cores-total, --memory-total). It
// returns nil when no group needed it.
func (a *Autoscaler) scaleUpToMinSize(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health) *processors.ScaleUpStatus {
	logger := klog.FromContext(ctx)
	var status *processors.ScaleUpStatus
	for _, gs := range state.Groups {
		id := gs.Group.Id()
		template := lc.Templates[id]
		if gs.Target >= gs.Min || template == nil || !health.Groups[id].Healthy {
			continue
		}
		if backedOff, _ := a.registry.BackedOff(id, lc.Now); backedOff {
			continue
		}
		delta := gs.Min - gs.Target
		for _, l := range a.limiters {
			if n, reasons := l.Headroom(ctx, lc, gs.Group, template.Node, delta); n < delta {
				logger.V(2).Info("Scale-up to min size capped", "nodeGroup", id, "wanted", delta, "allowed", n, "reasons", reasons)
				delta = n
			}
		}
		if delta <= 0 {
			continue
		}
		if status == nil {
			status = &processors.ScaleUpStatus{Result: processors.ScaleUpSuccessful}
		}
		logger.Info("Scale-up to min size", "nodeGroup", id, "from", gs.Target, "to", gs.Target+delta, "min", gs.Min)
		if err := gs.Group.IncreaseSize(delta); err != nil {
			a.registry.RegisterFailedScaleUp(id, delta, err, lc.Now)
			status.Result = processors.ScaleUpError
			status.Error = fmt.Errorf("increasing node group %s by %d to its min size: %w", id, delta, err)
			continue
		}
		a.registerScaleUp(lc, gs, delta)
		for _, l := range a.limiters {
			l.Planned(ctx, lc, gs.Group, template.Node, delta)
		}
		status.Increases = append(status.Increases, processors.GroupIncrease{Group: gs.Group, Current: gs.Target, New: gs.Target + delta, Max: gs.Max})
	}
	return status
}
