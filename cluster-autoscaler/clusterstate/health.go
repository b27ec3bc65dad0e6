package clusterstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// HealthOptions are upstream's unready rules.
type HealthOptions struct {
	// MaxTotalUnreadyPercentage is --max-total-unready-percentage: above this
	// share of unready nodes (and more than OkTotalUnreadyCount of them) the
	// cluster is unhealthy and the autoscaler stops acting.
	MaxTotalUnreadyPercentage float64
	// OkTotalUnreadyCount is --ok-total-unready-count: this many unready nodes
	// never make the cluster (or a node group) unhealthy.
	OkTotalUnreadyCount int
	// MaxNodeStartupTime is how long a registered node that is not ready yet
	// counts as starting rather than unready.
	MaxNodeStartupTime time.Duration
}

// Readiness counts nodes by upstream's readiness categories. Every registered
// node is in exactly one of Ready, Unready, NotStarted, Suspended and Deleted;
// ResourceUnready are the Unready ones whose GPU is missing from allocatable.
// LongUnregistered and Unregistered are instances without a registered node,
// past --max-node-provision-time and within it.
type Readiness struct {
	Registered                                     int
	Ready, Unready, NotStarted, Suspended, Deleted int
	ResourceUnready                                int
	LongUnregistered, Unregistered                 int
}

// suspendedCondition is the node condition upstream counts as suspended.
const suspendedCondition corev1.NodeConditionType = "Suspended"

// add puts a registered node in its category at now, as upstream's
// updateReadinessStats does.
func (r *Readiness) add(n *corev1.Node, now time.Time, maxStartup time.Duration) {
	r.Registered++
	ready, resourceUnready := nodeReadiness(n)
	switch {
	case nodetemplate.BeingDeleted(n):
		// Upstream's test, for a provider that cannot tell whether the
		// instance still exists: a node being deleted.
		r.Deleted++
	case conditionTrue(n, suspendedCondition):
		r.Suspended++
	case ready:
		r.Ready++
	case n.CreationTimestamp.Add(maxStartup).After(now):
		r.NotStarted++
	default:
		r.Unready++
		if resourceUnready {
			r.ResourceUnready++
		}
	}
}

// nodeReadiness is upstream's GetNodeReadiness, with its GPU processor's
// override: a node is ready when its Ready condition is True, it has neither
// disk pressure nor an unavailable network, and carries none of the matching
// node.kubernetes.io taints; a ready node whose GPU label promises a GPU that
// is not allocatable yet is resource-unready instead.
func nodeReadiness(n *corev1.Node) (ready, resourceUnready bool) {
	found := false
	ready = true
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			found = true
			if c.Status != corev1.ConditionTrue {
				ready = false
			}
		case corev1.NodeDiskPressure, corev1.NodeNetworkUnavailable:
			if c.Status == corev1.ConditionTrue {
				ready = false
			}
		}
	}
	for _, t := range n.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeNotReady, corev1.TaintNodeDiskPressure, corev1.TaintNodeNetworkUnavailable:
			ready = false
		}
	}
	if !found || !ready {
		return false, false
	}
	if _, labelled := n.Labels[metrics.GPULabel]; labelled && metrics.GPUOf(n, nil).Type == "unexpected-label" {
		return false, true
	}
	return true, false
}

func conditionTrue(n *corev1.Node, t corev1.NodeConditionType) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Health is the cluster's and every node group's health in one loop.
type Health struct {
	Cluster        Readiness
	ClusterHealthy bool
	Groups         map[string]GroupHealth
}

// GroupHealth is one node group's health.
type GroupHealth struct {
	Readiness
	Healthy bool
}

// NodeCounts are the cluster's readiness as nodes_count reports it.
func (h *Health) NodeCounts() metrics.NodeCounts {
	r := h.Cluster
	return metrics.NodeCounts{Ready: r.Ready, Unready: r.Unready, NotStarted: r.NotStarted, Suspended: r.Suspended,
		LongUnregistered: r.LongUnregistered, Unregistered: r.Unregistered}
}

// CheckHealth counts the readiness of every node of the loop's state and
// applies upstream's unready rules. The cluster is unhealthy when more than
// OkTotalUnreadyCount nodes are unready and they are more than
// MaxTotalUnreadyPercentage of all registered nodes. A node group is unhealthy
// when fewer of its nodes are ready (or suspended) than it should have, by
// more than OkTotalUnreadyCount and more than MaxTotalUnreadyPercentage of its
// registered nodes; it should have its target size, less instances past
// --max-node-provision-time and less the nodes of its scale-up in progress.
func (r *Registry) CheckHealth(opts HealthOptions, state *State, nodes []*corev1.Node) *Health {
	h := &Health{Groups: make(map[string]GroupHealth, len(state.Groups))}
	for _, n := range nodes {
		h.Cluster.add(n, state.Now, opts.MaxNodeStartupTime)
	}
	for _, gs := range state.Groups {
		var g Readiness
		for _, n := range gs.Nodes {
			g.add(n, state.Now, opts.MaxNodeStartupTime)
		}
		g.LongUnregistered = len(gs.Late)
		// Failed instances will not register, so they are in neither count,
		// as upstream's expectedToRegister.
		g.Unregistered = len(gs.Unregistered) - len(gs.Late) - len(gs.Failed)
		h.Cluster.LongUnregistered += g.LongUnregistered
		h.Cluster.Unregistered += g.Unregistered
		id := gs.Group.Id()
		// Update ends a scale-up request once its nodes registered and fails it
		// once it is due; one past due here is not counted on either.
		coming := 0
		if req, ok := r.requests[id]; ok && !state.Now.After(req.due) {
			coming = req.increase
		}
		h.Groups[id] = GroupHealth{Readiness: g, Healthy: groupHealthy(opts, gs.Target, g, coming)}
	}
	h.ClusterHealthy = !tooManyUnready(opts, h.Cluster.Unready, len(nodes))
	return h
}

// groupHealthy is upstream's IsNodeGroupHealthy; coming are the nodes of a
// scale-up in progress.
func groupHealthy(opts HealthOptions, target int, r Readiness, coming int) bool {
	minNodes := target - r.LongUnregistered - coming
	if r.Registered == 0 && r.LongUnregistered == 0 && r.Unregistered == 0 {
		// No node has shown up: fine when none is expected, or all expected
		// ones are still on their way.
		return target == 0 || minNodes <= 0
	}
	missing := max(0, minNodes-r.Ready-r.Suspended)
	return !tooManyUnready(opts, missing, r.Ready+r.Unready+r.NotStarted+r.Suspended)
}

func tooManyUnready(opts HealthOptions, unready, total int) bool {
	return unready > opts.OkTotalUnreadyCount && float64(unready) > opts.MaxTotalUnreadyPercentage/100*float64(total)
}
