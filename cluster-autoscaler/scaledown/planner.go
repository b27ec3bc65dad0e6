// Package scaledown removes nodes nobody needs, as upstream's scale-down does:
// a node whose requested utilisation stays under a threshold for the unneeded
// time, and whose pods all fit elsewhere (checked with the scheduler's own
// plugins, quota included), is tainted, drained through the Eviction API and
// deleted. It never goes below a node group's min size, the --cores-total and
// --memory-total minimums, or the allocatable the ElasticQuotaTree's root min
// guarantees.
package scaledown

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/processors"
)

// Input is what one loop knows.
type Input struct {
	Now   time.Time
	Nodes []*corev1.Node
	// Pods are the pods bound to nodes.
	Pods []*corev1.Pod
	PDBs []*policyv1.PodDisruptionBudget
	// Controllers, when set, look up the pods' ReplicaSets and
	// ReplicationControllers.
	Controllers *Controllers
	// GroupOf maps a node to its group; nil for nodes no group manages.
	GroupOf func(*corev1.Node) cloudprovider.NodeGroup
	// Targets are the groups' target sizes.
	Targets map[string]int
	// RootMin is the ElasticQuotaTree root's min, nil without a tree.
	RootMin corev1.ResourceList
	// MayRemove is false while a delay after a scale-up or a failure runs.
	MayRemove bool
	// GroupInDelay, when set (--scale-down-delay-type-local), reports the
	// groups whose own delays run: their nodes are no removal candidates,
	// though pods may still move onto them.
	GroupInDelay func(groupID string) bool
}

// Plan is a loop's scale-down decision.
type Plan struct {
	Removals []processors.NodeRemoval
	Unneeded map[string]int
	Kept     []processors.KeptNode
	// UnneededNodes are the unneeded nodes by name, with since when.
	UnneededNodes map[string]time.Time
	// Skipped are the candidates the simulation timeout left unchecked.
	Skipped []string
}

// Planner remembers since when each node has been unneeded, and until when a
// node found unremovable is left alone.
type Planner struct {
	opts          Options
	fw            *simulator.Framework
	unneededSince map[string]time.Time
	recheckAt     map[string]time.Time
	started       bool
}

// NewPlanner builds a planner simulating with fw.
func NewPlanner(opts Options, fw *simulator.Framework) *Planner {
	return &Planner{opts: opts, fw: fw, unneededSince: map[string]time.Time{}, recheckAt: map[string]time.Time{}}
}

type candidate struct {
	node        *corev1.Node
	group       cloudprovider.NodeGroup
	utilization float64
	pods        []*corev1.Pod // to move
	index       int           // in the destination list
	unready     bool
}

// Forget drops every node's unneeded time, as upstream's planner does while
// the cluster is unhealthy: it starts over once the cluster is healthy again.
func (p *Planner) Forget() { p.unneededSince = map[string]time.Time{} }

// Plan decides which nodes to remove now.
func (p *Planner) Plan(ctx context.Context, in Input) (Plan, error) {
	logger := klog.FromContext(ctx)
	plan := Plan{Unneeded: map[string]int{}, UnneededNodes: map[string]time.Time{}}
	if !p.opts.Enabled {
		p.unneededSince = map[string]time.Time{}
		return plan, nil
	}
	if !p.started {
		p.started = true
		p.loadDeletionCandidates(ctx, in)
	}
	podsByNode := map[string][]*corev1.Pod{}
	for _, pod := range in.Pods {
		podsByNode[pod.Spec.NodeName] = append(podsByNode[pod.Spec.NodeName], pod)
	}
	snapshot := simulator.NewSnapshot(in.Nodes, in.Pods)
	p.fw.SetSnapshot(snapshot)
	infos, err := snapshot.NodeInfos()
	if err != nil {
		return plan, fmt.Errorf("listing snapshot nodes: %w", err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	dest := newDestinations(infos)

	var candidates []*candidate
	seen := map[string]bool{}
	for i, info := range infos {
		node := info.Node()
		group := in.GroupOf(node)
		if group == nil || nodetemplate.BeingDeleted(node) {
			dest.exclude(i)
			continue
		}
		if in.GroupInDelay != nil && in.GroupInDelay(group.Id()) {
			continue
		}
		kept := func(reason string, params ...string) {
			plan.Kept = append(plan.Kept, processors.KeptNode{Node: node, GroupID: group.Id(), Reason: keptReason(reason, params...)})
		}
		if node.Annotations[ScaleDownDisabledAnnotation] == "true" {
			kept(reasonScaleDownOff)
			continue
		}
		if at, ok := p.recheckAt[node.Name]; ok && in.Now.Before(at) {
			kept(reasonRecentlyUnremovable)
			continue
		}
		ready := isReady(node)
		if !ready && !p.opts.UnreadyEnabled {
			kept(reasonUnreadyOff)
			continue
		}
		u, threshold := utilization(node, podsByNode[node.Name], p.opts)
		// At or below the threshold is underutilized, as upstream's.
		if u > threshold {
			continue
		}
		c := &candidate{node: node, group: group, utilization: u, index: i, unready: !ready}
		blocked := ""
		for _, pod := range podsByNode[node.Name] {
			switch kind, reason := classify(pod, in.PDBs, in.Controllers, p.opts, in.Now); kind {
			case podBlocks:
				blocked = reason
				kept(reason, pod.Namespace+"/"+pod.Name)
				p.recheckLater(node.Name, in.Now)
			case podMoves:
				c.pods = append(c.pods, pod)
			}
			if blocked != "" {
				break
			}
		}
		if blocked != "" {
			continue
		}
		candidates = append(candidates, c)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].utilization != candidates[j].utilization {
			return candidates[i].utilization < candidates[j].utilization
		}
		return candidates[i].node.Name < candidates[j].node.Name
	})

	removedPerGroup := map[string]int{}
	remaining := totals(in.Nodes)
	empty, drains, nonEmpty := 0, 0, 0
	simulationStart := time.Now()
	for i, c := range candidates {
		if p.opts.SimulationTimeout > 0 && time.Since(simulationStart) > p.opts.SimulationTimeout {
			// As upstream's --scale-down-simulation-timeout: the rest are
			// not unneeded this loop.
			for _, rest := range candidates[i:] {
				plan.Skipped = append(plan.Skipped, rest.node.Name)
			}
			logger.Info("Scale-down simulation timed out", "skipped", len(candidates)-i, "candidates", len(candidates),
				"timeout", p.opts.SimulationTimeout)
			break
		}
		id := c.group.Id()
		if len(c.pods) > 0 {
			if p.opts.NonEmptyCandidates > 0 && nonEmpty >= p.opts.NonEmptyCandidates {
				continue
			}
			nonEmpty++
		}
		dest.exclude(c.index)
		if !dest.place(ctx, p.fw, c.pods) {
			logger.V(4).Info("Underutilized node's pods fit nowhere else", "node", c.node.Name, "pods", len(c.pods))
			dest.include(c.index)
			plan.Kept = append(plan.Kept, processors.KeptNode{Node: c.node, GroupID: id, Reason: keptReason(reasonNoPlace)})
			p.recheckLater(c.node.Name, in.Now)
			continue
		}
		seen[c.node.Name] = true
		plan.Unneeded[id]++
		since, ok := p.unneededSince[c.node.Name]
		if !ok {
			since = in.Now
			p.unneededSince[c.node.Name] = since
		}
		plan.UnneededNodes[c.node.Name] = since
		why := ""
		below := p.belowMinimums(remaining, c.node)
		switch {
		case in.Targets[id]-removedPerGroup[id]-1 < c.group.MinSize():
			why = reasonMinSize
		case len(below) > 0:
			why = reasonMinResources
		case !keepsRootMin(remaining, c.node, in.RootMin):
			why = reasonRootMin
		}
		if why != "" {
			dest.unplace(c.pods)
			dest.include(c.index)
			reason := rootMinReason(why, remaining, c.node, in.RootMin)
			if why == reasonMinResources {
				// The resources the removal would take below their minimum,
				// which upstream's skipped_scale_events_count names.
				reason = keptReason(why, below...)
			}
			plan.Kept = append(plan.Kept, processors.KeptNode{Node: c.node, GroupID: id, Reason: reason})
			continue
		}
		unneededTime := p.opts.UnneededTime
		if c.unready {
			unneededTime = p.opts.UnreadyTime
		}
		ready := in.MayRemove && in.Now.Sub(since) >= unneededTime
		isEmpty := len(c.pods) == 0
		logger.V(4).Info("Unneeded node", "node", c.node.Name, "utilization", c.utilization, "pods", len(c.pods),
			"unneededFor", in.Now.Sub(since), "mayRemove", in.MayRemove, "ready", ready)
		full := empty+drains >= max(p.opts.MaxParallelism, 1) ||
			(isEmpty && empty >= p.opts.MaxEmptyBulkDelete) || (!isEmpty && drains >= max(p.opts.MaxDrainParallelism, 1))
		if !ready || full {
			// Stays unneeded; its pods' simulated places are released for the
			// nodes that are removed now.
			dest.unplace(c.pods)
			dest.include(c.index)
			continue
		}
		if isEmpty {
			empty++
		} else {
			drains++
		}
		removedPerGroup[id]++
		subtract(remaining, c.node)
		plan.Removals = append(plan.Removals, processors.NodeRemoval{Node: c.node, GroupID: id, Evicted: c.pods})
		logger.V(2).Info("Node to be removed", "node", c.node.Name, "nodeGroup", id, "utilization", c.utilization, "pods", len(c.pods))
	}
	for name := range p.unneededSince {
		if !seen[name] {
			delete(p.unneededSince, name)
		}
	}
	for name, at := range p.recheckAt {
		if !in.Now.Before(at) {
			delete(p.recheckAt, name)
		}
	}
	return plan, nil
}

// recheckLater leaves a node found unremovable alone for
// --unremovable-node-recheck-timeout, as upstream's planner.
func (p *Planner) recheckLater(name string, now time.Time) {
	if p.opts.UnremovableRecheckTimeout > 0 {
		p.recheckAt[name] = now.Add(p.opts.UnremovableRecheckTimeout)
	}
}

// loadDeletionCandidates takes each node's unneeded time from its
// DeletionCandidateOfClusterAutoscaler taint when the taint is younger than
// --node-deletion-candidate-ttl, as upstream does after a restart.
func (p *Planner) loadDeletionCandidates(ctx context.Context, in Input) {
	if p.opts.DeletionCandidateTTL <= 0 {
		return
	}
	for _, n := range in.Nodes {
		since, ok := DeletionCandidateSince(n)
		if !ok || since.Add(p.opts.DeletionCandidateTTL).Before(in.Now) {
			continue
		}
		p.unneededSince[n.Name] = since
		klog.FromContext(ctx).V(4).Info("Unneeded since its deletion candidate taint", "node", n.Name, "since", since)
	}
}

// isReady is the node's Ready condition. A node that is not ready is removed
// after --scale-down-unready-time, or never with
// --scale-down-unready-enabled=false.
func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

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

func keptReason(reason string, params ...string) processors.Reason {
	msg := reason
	if len(params) > 0 {
		msg = reason + ": " + strings.Join(params, ", ")
	}
	return processors.Reason{MessageID: processors.MessageNoScaleDownNode + "." + reason, Parameters: params, Message: msg}
}

// destinations are the nodes pods may move to, with the pods already moved
// there in this loop; nodes are cloned only when a pod lands on them.
type destinations struct {
	infos    []fwk.NodeInfo
	cloned   []bool
	excluded []bool
	placed   map[*corev1.Pod]int
	moved    map[*corev1.Pod]*corev1.Pod
}

func newDestinations(infos []fwk.NodeInfo) *destinations {
	return &destinations{
		infos: append([]fwk.NodeInfo(nil), infos...), cloned: make([]bool, len(infos)),
		excluded: make([]bool, len(infos)), placed: map[*corev1.Pod]int{}, moved: map[*corev1.Pod]*corev1.Pod{},
	}
}

func (d *destinations) exclude(i int) { d.excluded[i] = true }
func (d *destinations) include(i int) { d.excluded[i] = false }

// place finds a node for every pod, all or none.
func (d *destinations) place(ctx context.Context, fw *simulator.Framework, pods []*corev1.Pod) bool {
	for _, pod := range pods {
		// The pod as it would be recreated: not bound. NodeName would pin it.
		moved := pod.DeepCopy()
		moved.Spec.NodeName = ""
		check := fw.PreFilter(ctx, moved)
		info, err := framework.NewPodInfo(moved)
		if err != nil {
			d.unplace(pods)
			return false
		}
		ok := false
		for i := range d.infos {
			if d.excluded[i] {
				continue
			}
			if st := check.Fits(ctx, d.infos[i]); !st.IsSuccess() {
				klog.FromContext(ctx).V(5).Info("Pod does not fit", "pod", klog.KObj(pod), "node", d.infos[i].Node().Name, "reason", st.Message())
				continue
			}
			if !d.cloned[i] {
				d.infos[i] = d.infos[i].Snapshot()
				d.cloned[i] = true
			}
			d.infos[i].AddPodInfo(info)
			d.placed[pod] = i
			d.moved[pod] = moved
			ok = true
			break
		}
		if !ok {
			d.unplace(pods)
			return false
		}
	}
	return true
}

// unplace takes back the simulated moves of pods.
func (d *destinations) unplace(pods []*corev1.Pod) {
	for _, pod := range pods {
		i, ok := d.placed[pod]
		if !ok {
			continue
		}
		_ = d.infos[i].RemovePod(klog.Background(), d.moved[pod])
		delete(d.placed, pod)
		delete(d.moved, pod)
	}
}
