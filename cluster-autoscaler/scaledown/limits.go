package scaledown

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/processors"
)

// totals sums the nodes' capacity (for the --cores-total and --memory-total
// minimums) and allocatable (for the tree's root min).
type clusterTotals struct {
	capacityCPU, capacityMemory int64
	allocatable                 corev1.ResourceList
}

func totals(nodes []*corev1.Node) *clusterTotals {
	t := &clusterTotals{allocatable: corev1.ResourceList{}}
	for _, n := range nodes {
		if nodetemplate.BeingDeleted(n) {
			continue
		}
		t.capacityCPU += n.Status.Capacity.Cpu().MilliValue()
		t.capacityMemory += n.Status.Capacity.Memory().Value()
		for name, q := range n.Status.Allocatable {
			sum := t.allocatable[name]
			sum.Add(q)
			t.allocatable[name] = sum
		}
	}
	return t
}

func subtract(t *clusterTotals, n *corev1.Node) {
	t.capacityCPU -= n.Status.Capacity.Cpu().MilliValue()
	t.capacityMemory -= n.Status.Capacity.Memory().Value()
	for name, q := range n.Status.Allocatable {
		sum := t.allocatable[name]
		sum.Sub(q)
		t.allocatable[name] = sum
	}
}

// belowMinimums are the resources, of cpu and memory, that removing n would
// take below --cores-total's and --memory-total's minimums.
func (p *Planner) belowMinimums(t *clusterTotals, n *corev1.Node) []string {
	var below []string
	if t.capacityCPU-n.Status.Capacity.Cpu().MilliValue() < p.opts.MinCores*1000 {
		below = append(below, string(corev1.ResourceCPU))
	}
	if t.capacityMemory-n.Status.Capacity.Memory().Value() < p.opts.MinMemory {
		below = append(below, string(corev1.ResourceMemory))
	}
	return below
}

// keepsRootMin reports whether removing n leaves at least the tree root's min
// allocatable on every resource the min names: seed 000's "root min <= total
// cluster resources", which reclaim relies on to honour every guarantee.
func keepsRootMin(t *clusterTotals, n *corev1.Node, rootMin corev1.ResourceList) bool {
	for name, min := range rootMin {
		after := t.allocatable[name]
		after.Sub(n.Status.Allocatable[name])
		if after.Cmp(min) < 0 {
			return false
		}
	}
	return true
}

func rootMinReason(why string, t *clusterTotals, n *corev1.Node, rootMin corev1.ResourceList) processors.Reason {
	if why != reasonRootMin {
		return keptReason(why)
	}
	names := make([]string, 0, len(rootMin))
	for name := range rootMin {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		min := rootMin[corev1.ResourceName(name)]
		after := t.allocatable[corev1.ResourceName(name)]
		after.Sub(n.Status.Allocatable[corev1.ResourceName(name)])
		if after.Cmp(min) < 0 {
			return keptReason(why, fmt.Sprintf("removing the node would leave %s allocatable %s, below the ElasticQuotaTree root min %s",
				name, after.String(), min.String()))
		}
	}
	return keptReason(why)
}

// keptByMinimums is why removing c now would go below a minimum: its node
// group's min size, --cores-total's or --memory-total's minimum, or the
// ElasticQuotaTree root's min allocatable; false when none.
func (p *Planner) keptByMinimums(r *round, c *candidate) (processors.Reason, bool) {
	id := c.group.Id()
	below := p.belowMinimums(r.remaining, c.node)
	switch {
	case r.in.Targets[id]-r.removedPerGroup[id]-1 < c.group.MinSize():
		return keptReason(reasonMinSize), true
	case len(below) > 0:
		// The resources the removal would take below their minimum, which
		// upstream's skipped_scale_events_count names.
		return keptReason(reasonMinResources, below...), true
	case !keepsRootMin(r.remaining, c.node, r.in.RootMin):
		return rootMinReason(reasonRootMin, r.remaining, c.node, r.in.RootMin), true
	}
	return processors.Reason{}, false
}

// parallelismFull says this loop removes no more nodes like c (empty or to
// drain): --max-scale-down-parallelism in all, --max-empty-bulk-delete empty
// ones, --max-drain-parallelism ones to drain.
func (p *Planner) parallelismFull(r *round, empty bool) bool {
	return r.empty+r.drains >= max(p.opts.MaxParallelism, 1) ||
		(empty && r.empty >= p.opts.MaxEmptyBulkDelete) || (!empty && r.drains >= max(p.opts.MaxDrainParallelism, 1))
}
