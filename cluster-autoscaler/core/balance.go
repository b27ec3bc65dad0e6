package core

import (
	"context"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/resources"
)

// basicIgnoredLabels are upstream's labels that never count against
// similarity (hostname, zone and region, and two per-group labels), with the
// labels that name a group or its zone on the providers Quotascale and
// upstream know: a template carries its group's name, which must not make
// two groups of one shape dissimilar.
var basicIgnoredLabels = []string{
	corev1.LabelHostname,
	corev1.LabelTopologyZone,
	corev1.LabelFailureDomainBetaZone,
	corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaRegion,
	"beta.kubernetes.io/fluentd-ds-ready",
	"kops.k8s.io/instancegroup",
	"quotascale.io/node-group",
	"cluster.x-k8s.io/deployment-name",
	"cluster.x-k8s.io/set-name",
	"node.cluster.x-k8s.io/uninitialized",
	"topology.ebs.csi.aws.com/zone",
	"topology.gke.io/zone",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"kubernetes.azure.com/agentpool",
}

// similarity is upstream's node group comparator (processors/nodegroupset):
// with --balancing-label, two templates are similar when they carry each of
// those labels with the same value; otherwise when their capacity is equal
// (memory within --memory-difference-ratio), their allocatable within
// --max-allocatable-difference-ratio and their free resources (allocatable
// less the template's DaemonSet pods) within --max-free-difference-ratio,
// and their labels are equal apart from the ignored ones
// (--balancing-ignore-label adds to them). Taints are not compared, as
// upstream; a similar group must also take the same pods (scaleUp).
type similarity struct {
	labels                                   []string
	ignored                                  map[string]bool
	memoryRatio, allocatableRatio, freeRatio float64
}

func newSimilarity(opts config.Options) similarity {
	s := similarity{labels: opts.BalancingLabels, ignored: map[string]bool{},
		memoryRatio: opts.MemoryDifferenceRatio, allocatableRatio: opts.MaxAllocatableDifferenceRatio, freeRatio: opts.MaxFreeDifferenceRatio}
	for _, l := range slices.Concat(basicIgnoredLabels, opts.BalancingIgnoreLabels) {
		s.ignored[l] = true
	}
	return s
}

func (s similarity) similar(a, b *cloudprovider.NodeInfo) bool {
	if len(s.labels) > 0 {
		for _, l := range s.labels {
			va, okA := a.Node.Labels[l]
			vb, okB := b.Node.Labels[l]
			if !okA || !okB || va != vb {
				return false
			}
		}
		return true
	}
	ca, cb := a.Node.Status.Capacity, b.Node.Status.Capacity
	if len(ca) != len(cb) {
		return false
	}
	for name, qa := range ca {
		qb, ok := cb[name]
		switch {
		case !ok:
			return false
		case name == corev1.ResourceMemory:
			if !withinRatio(qa, qb, s.memoryRatio) {
				return false
			}
		case qa.Cmp(qb) != 0:
			return false
		}
	}
	if !listsWithinRatio(a.Node.Status.Allocatable, b.Node.Status.Allocatable, s.allocatableRatio) ||
		!listsWithinRatio(free(a), free(b), s.freeRatio) {
		return false
	}
	return s.labelsEqual(a.Node.Labels, b.Node.Labels)
}

func (s similarity) labelsEqual(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; !s.ignored[k] && (!ok || v != w) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !s.ignored[k] && !ok {
			return false
		}
	}
	return true
}

// withinRatio is upstream's tolerance: the two differ by at most ratio of
// the larger.
func withinRatio(a, b resource.Quantity, ratio float64) bool {
	x, y := float64(a.MilliValue()), float64(b.MilliValue())
	return math.Abs(x-y) <= math.Max(x, y)*ratio
}

// listsWithinRatio: both lists have the same resources, each within ratio.
func listsWithinRatio(a, b corev1.ResourceList, ratio float64) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || !withinRatio(qa, qb, ratio) {
			return false
		}
	}
	return true
}

// free is what a template node has left once its DaemonSet pods run, on
// cpu, memory, pods, ephemeral storage and every resource those pods
// request, as upstream computes it.
func free(t *cloudprovider.NodeInfo) corev1.ResourceList {
	requested := corev1.ResourceList{corev1.ResourceCPU: {}, corev1.ResourceMemory: {}, corev1.ResourcePods: {}, corev1.ResourceEphemeralStorage: {}}
	for _, p := range t.Pods {
		for name, q := range resources.PodRequests(p) {
			sum := requested[name]
			sum.Add(q)
			requested[name] = sum
		}
	}
	out := make(corev1.ResourceList, len(requested))
	for name, q := range requested {
		left := t.Node.Status.Allocatable[name].DeepCopy()
		left.Sub(q)
		out[name] = left
	}
	return out
}

// balance spreads count new nodes over the chosen group and the groups similar
// to it, one node at a time to the smallest group that can still take one. A
// group capped by its max size or by a quota hands its share to the others
// (upstream does not: its #9567), because each node is planned with the limiters
// as it is assigned, so a shared quota's headroom is seen by every group.
func (a *Autoscaler) balance(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health,
	best cloudprovider.NodeGroup, count int, takes map[string][]int) map[string]int {
	template := lc.Templates[best.Id()]
	candidates := []*clusterstate.GroupState{state.Group(best.Id())}
	for _, gs := range state.Groups {
		t := lc.Templates[gs.Group.Id()]
		if gs.Group.Id() == best.Id() || t == nil || !slices.Equal(takes[best.Id()], takes[gs.Group.Id()]) || !a.similarity.similar(template, t) {
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
