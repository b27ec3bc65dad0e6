package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// Functions of function_duration_seconds and activities of last_activity, as
// upstream names them.
const (
	Main                 = "main"
	MainSuccessful       = "mainSuccessful"
	Autoscaling          = "autoscaling"
	ScaleUp              = "scaleUp"
	ScaleDown            = "scaleDown"
	FindUnneeded         = "findUnneeded"
	UpdateState          = "updateClusterState"
	FilterOutSchedulable = "filterOutSchedulable"
	CloudProviderRefresh = "cloudProviderRefresh"
	Estimate             = "scaleUp:estimate"
	ScaleDownSoftTaint   = "scaleDown:softTaintUnneeded"
)

// ObserveDuration records how long function took since start, in the
// histogram and the summary, as upstream's UpdateDurationFromStart.
func (m *Metrics) ObserveDuration(function string, start time.Time) {
	d := time.Since(start).Seconds()
	m.functionDuration.WithLabelValues(function).Observe(d)
	m.functionDurationSummary.WithLabelValues(function).Observe(d)
}

// SetLastActivity records when activity last ran, as a Unix time.
func (m *Metrics) SetLastActivity(activity string, t time.Time) {
	m.lastActivity.WithLabelValues(activity).Set(float64(t.Unix()))
}

// RegisterError counts a failed loop by the type of its error.
func (m *Metrics) RegisterError(errorType string) { m.errorsCount.WithLabelValues(errorType).Inc() }

// NodeCounts are nodes_count's states, upstream's readiness categories.
type NodeCounts struct {
	Ready, Unready, NotStarted, Suspended, LongUnregistered, Unregistered int
}

// UpdateClusterState records the cluster's health and its nodes by state.
func (m *Metrics) UpdateClusterState(safeToAutoscale bool, n NodeCounts) {
	m.clusterSafeToAutoscale.Set(boolValue(safeToAutoscale))
	for state, v := range map[string]int{
		"ready": n.Ready, "unready": n.Unready, "notStarted": n.NotStarted, "suspended": n.Suspended,
		"longUnregistered": n.LongUnregistered, "unregistered": n.Unregistered,
	} {
		m.nodesCount.WithLabelValues(state).Set(float64(v))
	}
}

// UpdateNodeGroupsCount records the node groups the autoscaler manages; it
// creates none (no node auto-provisioning), so autoprovisioned is 0.
func (m *Metrics) UpdateNodeGroupsCount(autoscaled int) {
	m.nodeGroupsCount.WithLabelValues("autoscaled").Set(float64(autoscaled))
	m.nodeGroupsCount.WithLabelValues("autoprovisioned").Set(0)
}

// UpdateUnschedulablePods records the pods the scheduler marked unschedulable
// and those it has not processed yet.
func (m *Metrics) UpdateUnschedulablePods(unschedulable, schedulerUnprocessed int) {
	m.unschedulablePodsCount.WithLabelValues("unschedulable").Set(float64(unschedulable))
	m.unschedulablePodsCount.WithLabelValues("scheduler_unprocessed").Set(float64(schedulerUnprocessed))
}

// UpdateMaxNodesCount records the sum of the node groups' max sizes, capped
// by --max-nodes-total.
func (m *Metrics) UpdateMaxNodesCount(n int) { m.maxNodesCount.Set(float64(n)) }

// UpdateClusterResources records the cores and bytes of memory of the nodes
// not being deleted.
func (m *Metrics) UpdateClusterResources(cores, memoryBytes int64) {
	m.cpuCurrentCores.Set(float64(cores))
	m.memoryCurrentBytes.Set(float64(memoryBytes))
}

// SetResourceLimits records --cores-total (cores) and --memory-total (bytes).
func (m *Metrics) SetResourceLimits(minCores, maxCores, minMemory, maxMemory int64) {
	m.cpuLimitsCores.WithLabelValues("minimum").Set(float64(minCores))
	m.cpuLimitsCores.WithLabelValues("maximum").Set(float64(maxCores))
	m.memoryLimitsBytes.WithLabelValues("minimum").Set(float64(minMemory))
	m.memoryLimitsBytes.WithLabelValues("maximum").Set(float64(maxMemory))
}

// NodeGroup is one node group's per-group metrics.
type NodeGroup struct {
	ID               string
	Min, Max, Target int
	Healthy          bool
	BackedOff        bool
	// BackoffReason is the error code of the failure behind the backoff.
	BackoffReason string
}

// UpdateNodeGroups records the per-group metrics, with
// --emit-per-nodegroup-metrics only. Groups gone since the last call are
// dropped. A group not backed off has one backoff series with an empty reason
// at 0, as upstream.
func (m *Metrics) UpdateNodeGroups(groups []NodeGroup) {
	if !m.perNodeGroup {
		return
	}
	for _, v := range []*prometheus.GaugeVec{m.nodeGroupMinCount, m.nodeGroupMaxCount, m.nodeGroupTargetCount, m.nodeGroupHealthiness, m.nodeGroupBackoffStatus} {
		v.Reset()
	}
	for _, g := range groups {
		m.nodeGroupMinCount.WithLabelValues(g.ID).Set(float64(g.Min))
		m.nodeGroupMaxCount.WithLabelValues(g.ID).Set(float64(g.Max))
		m.nodeGroupTargetCount.WithLabelValues(g.ID).Set(float64(g.Target))
		m.nodeGroupHealthiness.WithLabelValues(g.ID).Set(boolValue(g.Healthy))
		reason := ""
		if g.BackedOff {
			reason = g.BackoffReason
		}
		m.nodeGroupBackoffStatus.WithLabelValues(g.ID, reason).Set(boolValue(g.BackedOff))
	}
}

// GPU is what upstream's node counters say about a node's GPUs.
type GPU struct {
	ResourceName, Type, DRADrivers string
}

// GPUResourceNames are the GPU resources upstream recognizes, in its order.
var GPUResourceNames = []corev1.ResourceName{"nvidia.com/gpu", "habana.ai/gaudi", "gpu.intel.com/xe", "amd.com/gpu", "microsoft.com/directx"}

// GPULabel is the label Cluster API nodes carry with their GPU type.
const GPULabel = "cluster-api/accelerator"

// GPUOf describes a node's GPU as upstream's metrics do for the clusterapi
// provider, which lists no GPU types: no GPU is empty; a GPU resource without
// a type label is "generic"; with a type label it is "not-listed" (upstream's
// value for a type the provider does not list). A type label without the GPU
// resource is "missing-gpu" when the group's template (nil for a template
// itself) has it, and "unexpected-label" otherwise.
func GPUOf(node, template *corev1.Node) GPU {
	if node == nil {
		return GPU{}
	}
	gpuType, labelled := node.Labels[GPULabel]
	for _, name := range GPUResourceNames {
		if q, ok := node.Status.Allocatable[name]; ok && !q.IsZero() {
			if !labelled || gpuType == "" {
				return GPU{ResourceName: string(name), Type: "generic"}
			}
			return GPU{ResourceName: string(name), Type: "not-listed"}
		}
	}
	if !labelled {
		return GPU{}
	}
	if template != nil {
		for _, name := range GPUResourceNames {
			if q, ok := template.Status.Capacity[name]; ok && !q.IsZero() {
				return GPU{ResourceName: string(name), Type: "missing-gpu"}
			}
		}
	}
	return GPU{ResourceName: string(GPUResourceNames[0]), Type: "unexpected-label"}
}

// RegisterScaleUp counts nodes a scale-up added.
func (m *Metrics) RegisterScaleUp(nodes int, gpu GPU) {
	m.scaledUpNodes.WithLabelValues(gpu.ResourceName, gpu.Type, gpu.DRADrivers).Add(float64(nodes))
}

// RegisterFailedScaleUp counts one failed scale-up of nodes nodes, by reason.
func (m *Metrics) RegisterFailedScaleUp(reason string, nodes int, gpu GPU) {
	m.failedScaleUps.WithLabelValues(reason, gpu.ResourceName, gpu.Type, gpu.DRADrivers).Inc()
	m.failedNodeCreations.WithLabelValues(reason).Add(float64(nodes))
}

// RegisterScaleDown counts a removed node by reason.
func (m *Metrics) RegisterScaleDown(reason string, gpu GPU) {
	m.scaledDownNodes.WithLabelValues(reason, gpu.ResourceName, gpu.Type, gpu.DRADrivers).Inc()
}

// RegisterEvictions counts evictions by result.
func (m *Metrics) RegisterEvictions(result string, pods int) {
	m.evictedPods.WithLabelValues(result).Add(float64(pods))
}

// UpdateUnneeded records the unneeded nodes and the unremovable ones by
// reason; reasons not given are dropped.
func (m *Metrics) UpdateUnneeded(unneeded int, unremovable map[string]int) {
	m.unneededNodesCount.Set(float64(unneeded))
	m.unremovableNodesCount.Reset()
	for reason, n := range unremovable {
		m.unremovableNodesCount.WithLabelValues(reason).Set(float64(n))
	}
}

// SetScaleDownInCooldown records whether scale-down is paused.
func (m *Metrics) SetScaleDownInCooldown(cooldown bool) {
	m.scaleDownInCooldown.Set(boolValue(cooldown))
}

// RegisterOldUnregisteredRemoved counts instances removed because their node
// did not register in time.
func (m *Metrics) RegisterOldUnregisteredRemoved(n int) { m.oldUnregisteredRemoved.Add(float64(n)) }

// RegisterSkippedScaleDown counts a node kept because removing it would take
// the cluster below a minimum; reason is CPUResourceLimit or
// MemoryResourceLimit.
func (m *Metrics) RegisterSkippedScaleDown(reason string) {
	m.SkippedScaleEvents.WithLabelValues(DirectionDown, reason).Inc()
}

// SetMaxNodeSkipEvalDuration records the longest a node has been left
// unchecked by scale-down in a row.
func (m *Metrics) SetMaxNodeSkipEvalDuration(d time.Duration) {
	m.maxNodeSkipEvalDuration.Set(d.Seconds())
}

// ObserveNodeRemovalLatency records how long past its unneeded time a node
// took to be removed (deleted) or to be needed again, and what held it last
// ("none" when nothing did).
func (m *Metrics) ObserveNodeRemovalLatency(deleted bool, delayReason string, latency time.Duration) {
	m.nodeRemovalLatency.WithLabelValues(strconv.FormatBool(deleted), delayReason).Observe(latency.Seconds())
}

// RegisterStaleDataSkippedLoop counts a loop that scaled nothing because the
// API server was unreachable for too long.
func (m *Metrics) RegisterStaleDataSkippedLoop() { m.staleDataSkippedLoops.Inc() }

// RegisterFailedScaleDown counts a removal that failed and was rolled back.
func (m *Metrics) RegisterFailedScaleDown() { m.failedScaleDowns.Inc() }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
