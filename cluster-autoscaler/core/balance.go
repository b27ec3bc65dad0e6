package core

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/processors"
)

// groupIdentityLabels differ between otherwise identical groups (a group's name,
// its zone), so they do not count against similarity.
var groupIdentityLabels = map[string]bool{
	corev1.LabelHostname:                  true,
	corev1.LabelTopologyZone:              true,
	corev1.LabelFailureDomainBetaZone:     true,
	corev1.LabelTopologyRegion:            true,
	corev1.LabelFailureDomainBetaRegion:   true,
	"quotascale.io/node-group":            true,
	"cluster.x-k8s.io/deployment-name":    true,
	"cluster.x-k8s.io/set-name":           true,
	"node.cluster.x-k8s.io/uninitialized": true,
	"topology.ebs.csi.aws.com/zone":       true,
	"topology.gke.io/zone":                true,
	"cloud.google.com/gke-nodepool":       true,
	"eks.amazonaws.com/nodegroup":         true,
	"kubernetes.azure.com/agentpool":      true,
}

// similar reports whether two templates describe the same machine: same capacity
// and allocatable, same taints, same labels apart from group identity.
func similar(a, b *corev1.Node) bool {
	if !apiequality.Semantic.DeepEqual(a.Status.Capacity, b.Status.Capacity) ||
		!apiequality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		!apiequality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) {
		return false
	}
	strip := func(l map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range l {
			if !groupIdentityLabels[k] {
				out[k] = v
			}
		}
		return out
	}
	return apiequality.Semantic.DeepEqual(strip(a.Labels), strip(b.Labels))
}

// balance spreads count new nodes over the chosen group and the groups similar
// to it, one node at a time to the smallest group that can still take one. A
// group capped by its max size or by a quota hands its share to the others
// (upstream does not: its #9567), because each node is planned with the limiters
// as it is assigned, so a shared quota's headroom is seen by every group.
func (a *Autoscaler) balance(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health, best cloudprovider.NodeGroup, count int) map[string]int {
	template := lc.Templates[best.Id()]
	candidates := []*clusterstate.GroupState{state.Group(best.Id())}
	for _, gs := range state.Groups {
		t := lc.Templates[gs.Group.Id()]
		if gs.Group.Id() == best.Id() || t == nil || !similar(template.Node, t.Node) {
			continue
		}
		if backedOff, _ := a.registry.BackedOff(gs.Group.Id(), lc.Now); backedOff || !health.Groups[gs.Group.Id()].Healthy {
			continue
		}
		candidates = append(candidates, gs)
	}
	assigned := map[string]int{}
	for n := 0; n < count; n++ {
		sort.SliceStable(candidates, func(i, j int) bool {
			si := candidates[i].Target + assigned[candidates[i].Group.Id()]
			sj := candidates[j].Target + assigned[candidates[j].Group.Id()]
			if si != sj {
				return si < sj
			}
			return candidates[i].Group.Id() < candidates[j].Group.Id()
		})
		placed := false
		for _, gs := range candidates {
			id := gs.Group.Id()
			if gs.Target+assigned[id] >= gs.Max || !a.limitersAllowOne(ctx, lc, gs.Group) {
				continue
			}
			assigned[id]++
			for _, l := range a.limiters {
				l.Planned(ctx, lc, gs.Group, lc.Templates[id].Node, 1)
			}
			placed = true
			break
		}
		if !placed {
			break
		}
	}
	return assigned
}

func (a *Autoscaler) limitersAllowOne(ctx context.Context, lc *processors.LoopContext, g cloudprovider.NodeGroup) bool {
	for _, l := range a.limiters {
		if n, _ := l.Headroom(ctx, lc, g, lc.Templates[g.Id()].Node, 1); n < 1 {
			return false
		}
	}
	return true
}
