package core

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/processors"
)

// updateGroupMetrics records what upstream records about node groups each
// loop: how many there are, their summed max size (capped by
// --max-nodes-total) and, with --emit-per-nodegroup-metrics, each group's
// sizes, health and backoff.
func (a *Autoscaler) updateGroupMetrics(state *clusterstate.State, health *clusterstate.Health) {
	a.Metrics.UpdateNodeGroupsCount(len(state.Groups))
	maxNodes := 0
	groups := make([]metrics.NodeGroup, 0, len(state.Groups))
	for _, gs := range state.Groups {
		id := gs.Group.Id()
		maxNodes += gs.Max
		backedOff, info := a.registry.BackedOff(id, state.Now)
		groups = append(groups, metrics.NodeGroup{ID: id, Min: gs.Min, Max: gs.Max, Target: gs.Target,
			Healthy: health.Groups[id].Healthy, BackedOff: backedOff, BackoffReason: info.ErrorCode})
	}
	if a.opts.MaxNodesTotal > 0 {
		maxNodes = min(maxNodes, a.opts.MaxNodesTotal)
	}
	a.Metrics.UpdateMaxNodesCount(maxNodes)
	a.Metrics.UpdateNodeGroups(groups)
}

// recordFailures counts the failed scale-ups the registry saw since the last
// call, with the GPU of each group's template.
func (a *Autoscaler) recordFailures(templates map[string]*corev1.Node) {
	for _, f := range a.registry.TakeFailures() {
		a.Metrics.RegisterFailedScaleUp(f.Reason, f.Nodes, metrics.GPUOf(templates[f.GroupID], nil))
	}
}

// clusterResources are the cores (capacity, each node's rounded up) and bytes
// of memory of the nodes not being deleted, as upstream's
// cluster_cpu_current_cores and cluster_memory_current_bytes.
func clusterResources(nodes []*corev1.Node) (cores, memory int64) {
	for _, n := range nodes {
		if nodetemplate.BeingDeleted(n) {
			continue
		}
		cores += n.Status.Capacity.Cpu().Value() // rounded up, as Value does
		memory += n.Status.Capacity.Memory().Value()
	}
	return cores, memory
}

// unremovableReasons are the reasons of upstream's unremovable_nodes_count
// that the planner's own reasons map to; a pod that cannot move is
// upstream's BlockedByPod.
var unremovableReasons = map[string]string{
	"NoPlaceToMovePods":            "NoPlaceToMovePods",
	"NodeGroupMinSizeReached":      "NodeGroupMinSizeReached",
	"MinimalResourceLimitExceeded": "MinimalResourceLimitExceeded",
	"ScaleDownDisabledAnnotation":  "ScaleDownDisabledAnnotation",
	"NotUnderutilized":             "NotUnderutilized",
	"RecentlyUnremovable":          "RecentlyUnremovable",
}

// unremovableByReason counts kept nodes by upstream's reason.
func unremovableByReason(kept []processors.KeptNode) map[string]int {
	out := map[string]int{}
	for _, k := range kept {
		out[unremovableReason(k.Reason)]++
	}
	return out
}

// unremovableReason is upstream's name for why a node is kept. The
// ElasticQuotaTree's root min is Quotascale's own reason and keeps its name.
func unremovableReason(r processors.Reason) string {
	reason := strings.TrimPrefix(r.MessageID, processors.MessageNoScaleDownNode+".")
	if mapped, ok := unremovableReasons[reason]; ok {
		return mapped
	}
	if reason == "ElasticQuotaTreeRootMin" {
		return reason
	}
	return "BlockedByPod"
}

// minimumLimitReasons are the skipped_scale_events_count reasons of a node
// kept for --cores-total's or --memory-total's minimum, one per resource.
func minimumLimitReasons(r processors.Reason) []string {
	if r.MessageID != processors.MessageNoScaleDownNode+".MinimalResourceLimitExceeded" {
		return nil
	}
	var out []string
	for _, p := range r.Parameters {
		switch corev1.ResourceName(p) {
		case corev1.ResourceCPU:
			out = append(out, metrics.CPUResourceLimit)
		case corev1.ResourceMemory:
			out = append(out, metrics.MemoryResourceLimit)
		}
	}
	return out
}
