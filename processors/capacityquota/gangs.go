package capacityquota

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

var _ processors.GangLimiter = &Processor{}

// GangCapped counts a gang that got no node of group because the quotas that
// held the group's last headroom below what was wanted allow fewer nodes
// than the gang needs: once per quota and resource. The counter carries no
// gang label, as upstream's metrics carry no workload's name: a series per
// gang would outlive the gang and grow with every job ever run. The log line
// and the visibility log name the gang.
func (p *Processor) GangCapped(ctx context.Context, _ *processors.LoopContext, group cloudprovider.NodeGroup, g gang.Gang) {
	p.mu.Lock()
	exceeded := p.exceeded[group.Id()]
	p.mu.Unlock()
	for _, e := range exceeded {
		for _, r := range e.Resources {
			p.metrics.gangSkipped(e.Quota, string(r))
		}
		klog.FromContext(ctx).V(2).Info("CapacityQuota leaves a gang without nodes", "quota", e.Quota, "resources", e.Resources,
			"gang", g.Key.String(), "minCount", g.MinCount, "nodeGroup", group.Id())
	}
}

func (m *Metrics) gangSkipped(quota, resource string) {
	if m == nil {
		return
	}
	m.gangSkippedTotal.WithLabelValues(quota, resource).Inc()
}
