package core

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
)

// fixNodeGroupSizes lowers the target of every group whose target has run
// ahead of its instances for longer than --max-node-provision-time, by the
// difference, as upstream's loop does (fixNodeGroupSize). Replicas the
// infrastructure never even started (a MachineSet blocked by its preflight
// checks, a missing infrastructure template, a paused Cluster) would
// otherwise count as upcoming for ever: pending pods would wait on them and
// their capacity would use CapacityQuota headroom that another group could
// scale up with. It reports whether it lowered any target; the first error
// ends it, as upstream's.
func (a *Autoscaler) fixNodeGroupSizes(ctx context.Context, state *clusterstate.State, now time.Time) (bool, error) {
	logger := klog.FromContext(ctx)
	fixed := false
	for _, gs := range state.Groups {
		if gs.Ahead <= 0 || !gs.AheadSince.Add(a.opts.MaxNodeProvisionTime).Before(now) {
			continue
		}
		logger.Info("Decreasing the target size of a node group whose instances did not come",
			"nodeGroup", gs.Group.Id(), "target", gs.Target, "instances", gs.Target-gs.Ahead, "delta", -gs.Ahead,
			"since", gs.AheadSince, "maxNodeProvisionTime", a.opts.MaxNodeProvisionTime)
		if err := gs.Group.DecreaseTargetSize(-gs.Ahead); err != nil {
			return fixed, fmt.Errorf("decreasing the target size of node group %s by %d: %w", gs.Group.Id(), gs.Ahead, err)
		}
		fixed = true
	}
	return fixed, nil
}
