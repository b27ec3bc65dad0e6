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
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
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
	// NodeInfos, when set, keeps the nodes' NodeInfos from loop to loop,
	// shared with the scale-up's simulation.
	NodeInfos *simulator.NodeInfoCache
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

// Forget drops every node's unneeded time, as upstream's planner does while
// the cluster is unhealthy: it starts over once the cluster is healthy again.
func (p *Planner) Forget() { p.unneededSince = map[string]time.Time{} }

// Plan decides which nodes to remove now: the eligible nodes
// (eligibility.go), least utilized first, are those whose pods all find
// another place (destinations.go); each of them is unneeded, and is removed
// once it has been unneeded long enough, unless a limit keeps it (limits.go).
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
	var snapshot *simulator.Snapshot
	if in.NodeInfos != nil {
		snapshot = in.NodeInfos.Snapshot(in.Nodes, in.Pods)
	} else {
		snapshot = simulator.NewSnapshot(in.Nodes, in.Pods)
	}
	p.fw.SetSnapshot(snapshot)
	infos, err := snapshot.NodeInfos()
	if err != nil {
		return plan, fmt.Errorf("listing snapshot nodes: %w", err)
	}
	// Sorted in a copy: the snapshot's own list is what its name index
	// points into, and the NodeInfo cache hands the same list to every loop.
	infos = slices.Clone(infos)
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	r := &round{in: in, plan: &plan, dest: newDestinations(infos), remaining: totals(in.Nodes),
		removedPerGroup: map[string]int{}, seen: map[string]bool{}}
	candidates := p.eligible(in, infos, r.dest, &plan)
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
		p.consider(ctx, r, c)
	}
	p.forget(in.Now, r.seen)
	return plan, nil
}

// round is one Plan's state: the simulated moves so far, and the removals
// chosen so far, which the limits count.
type round struct {
	in              Input
	plan            *Plan
	dest            *destinations
	remaining       *clusterTotals
	removedPerGroup map[string]int
	// empty and drains count the removals chosen, nonEmpty the candidates
	// with pods whose moves were simulated.
	empty, drains, nonEmpty int
	// seen are the nodes found unneeded.
	seen map[string]bool
}

// consider decides one candidate: unneeded if its pods can move, removed now
// if no limit keeps it and it has been unneeded long enough.
func (p *Planner) consider(ctx context.Context, r *round, c *candidate) {
	logger := klog.FromContext(ctx)
	in, id := r.in, c.group.Id()
	if len(c.pods) > 0 {
		if p.opts.NonEmptyCandidates > 0 && r.nonEmpty >= p.opts.NonEmptyCandidates {
			return
		}
		r.nonEmpty++
	}
	r.dest.exclude(c.index)
	if !r.dest.place(ctx, p.fw, c.pods) {
		logger.V(4).Info("Underutilized node's pods fit nowhere else", "node", c.node.Name, "pods", len(c.pods))
		r.dest.include(c.index)
		r.plan.Kept = append(r.plan.Kept, processors.KeptNode{Node: c.node, GroupID: id, Reason: keptReason(reasonNoPlace)})
		p.recheckLater(c.node.Name, in.Now)
		return
	}
	r.seen[c.node.Name] = true
	r.plan.Unneeded[id]++
	since, ok := p.unneededSince[c.node.Name]
	if !ok {
		since = in.Now
		p.unneededSince[c.node.Name] = since
	}
	r.plan.UnneededNodes[c.node.Name] = since
	if reason, kept := p.keptByMinimums(r, c); kept {
		r.dest.unplace(c.pods)
		r.dest.include(c.index)
		r.plan.Kept = append(r.plan.Kept, processors.KeptNode{Node: c.node, GroupID: id, Reason: reason})
		return
	}
	unneededTime := p.opts.UnneededTime
	if c.unready {
		unneededTime = p.opts.UnreadyTime
	}
	ready := in.MayRemove && in.Now.Sub(since) >= unneededTime
	logger.V(4).Info("Unneeded node", "node", c.node.Name, "utilization", c.utilization, "pods", len(c.pods),
		"unneededFor", in.Now.Sub(since), "mayRemove", in.MayRemove, "ready", ready)
	if !ready || p.parallelismFull(r, len(c.pods) == 0) {
		// Stays unneeded; its pods' simulated places are released for the
		// nodes that are removed now.
		r.dest.unplace(c.pods)
		r.dest.include(c.index)
		return
	}
	if len(c.pods) == 0 {
		r.empty++
	} else {
		r.drains++
	}
	r.removedPerGroup[id]++
	subtract(r.remaining, c.node)
	r.plan.Removals = append(r.plan.Removals, processors.NodeRemoval{Node: c.node, GroupID: id, Evicted: c.pods})
	logger.V(2).Info("Node to be removed", "node", c.node.Name, "nodeGroup", id, "utilization", c.utilization, "pods", len(c.pods))
}

// forget drops the unneeded times of nodes not unneeded this loop, and the
// recheck times that have passed.
func (p *Planner) forget(now time.Time, seen map[string]bool) {
	for name := range p.unneededSince {
		if !seen[name] {
			delete(p.unneededSince, name)
		}
	}
	for name, at := range p.recheckAt {
		if !now.Before(at) {
			delete(p.recheckAt, name)
		}
	}
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

func keptReason(reason string, params ...string) processors.Reason {
	msg := reason
	if len(params) > 0 {
		msg = reason + ": " + strings.Join(params, ", ")
	}
	return processors.Reason{MessageID: processors.MessageNoScaleDownNode + "." + reason, Parameters: params, Message: msg}
}
