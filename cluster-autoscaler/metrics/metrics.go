// Package metrics holds the autoscaler's Prometheus metrics. The
// cluster_autoscaler_* metrics have the names, types, labels, label values and
// buckets of upstream's (kubernetes-sigs/cluster-autoscaler pkg/metrics), so
// that existing dashboards and alerts keep working; Quotascale's own are
// prefixed quotascale_.
//
// A process has one Metrics, made once (app.NewProcess) and kept across
// leadership changes: registering the same collector twice panics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "cluster_autoscaler"

// Metrics are registered on their own registry, served at /metrics.
type Metrics struct {
	Registry *prometheus.Registry

	// The cluster.
	clusterSafeToAutoscale prometheus.Gauge
	nodesCount             *prometheus.GaugeVec
	nodeGroupsCount        *prometheus.GaugeVec
	unschedulablePodsCount *prometheus.GaugeVec
	maxNodesCount          prometheus.Gauge
	cpuCurrentCores        prometheus.Gauge
	cpuLimitsCores         *prometheus.GaugeVec
	memoryCurrentBytes     prometheus.Gauge
	memoryLimitsBytes      *prometheus.GaugeVec

	// Per node group, registered with --emit-per-nodegroup-metrics only, as
	// upstream.
	perNodeGroup           bool
	nodeGroupMinCount      *prometheus.GaugeVec
	nodeGroupMaxCount      *prometheus.GaugeVec
	nodeGroupTargetCount   *prometheus.GaugeVec
	nodeGroupHealthiness   *prometheus.GaugeVec
	nodeGroupBackoffStatus *prometheus.GaugeVec

	// The loop.
	lastActivity            *prometheus.GaugeVec
	functionDuration        *prometheus.HistogramVec
	functionDurationSummary *prometheus.SummaryVec
	errorsCount             *prometheus.CounterVec

	// Scale-up and scale-down.
	scaledUpNodes           *prometheus.CounterVec
	failedScaleUps          *prometheus.CounterVec
	failedNodeCreations     *prometheus.CounterVec
	scaledDownNodes         *prometheus.CounterVec
	evictedPods             *prometheus.CounterVec
	unneededNodesCount      prometheus.Gauge
	unremovableNodesCount   *prometheus.GaugeVec
	scaleDownInCooldown     prometheus.Gauge
	oldUnregisteredRemoved  prometheus.Counter
	maxNodeSkipEvalDuration prometheus.Gauge
	nodeRemovalLatency      *prometheus.HistogramVec
	// SkippedScaleEvents is skipped_scale_events_count; the CapacityQuota
	// processor counts its scale-up refusals on it, with a reason per resource.
	SkippedScaleEvents *prometheus.CounterVec

	// Quotascale's own.
	staleDataSkippedLoops prometheus.Counter
	failedScaleDowns      prometheus.Counter
}

// Options choose which metrics are registered.
type Options struct {
	// EmitPerNodeGroupMetrics is --emit-per-nodegroup-metrics.
	EmitPerNodeGroupMetrics bool
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

// gpuLabels are the labels upstream puts on its node counters: the GPU
// resource and type of the node group's nodes and their DRA drivers.
var gpuLabels = []string{"gpu_resource_name", "gpu_name", "dra_drivers"}

// New registers every metric on a fresh registry, with the Go and process
// collectors, and gives the labelled series upstream initializes their zero,
// so that they are on /metrics before anything happened.
func New(opts Options) *Metrics {
	m := &Metrics{
		Registry:               prometheus.NewRegistry(),
		clusterSafeToAutoscale: gauge("cluster_safe_to_autoscale", "Whether or not cluster is healthy enough for autoscaling. 1 if it is, 0 otherwise."),
		nodesCount:             gaugeVec("nodes_count", "Number of nodes in cluster.", "state"),
		nodeGroupsCount:        gaugeVec("node_groups_count", "Number of node groups managed by CA.", "node_group_type"),
		unschedulablePodsCount: gaugeVec("unschedulable_pods_count", "Number of unschedulable pods in the cluster.", "type"),
		maxNodesCount:          gauge("max_nodes_count", "Maximum number of nodes in all node groups"),
		cpuCurrentCores:        gauge("cluster_cpu_current_cores", "Current number of cores in the cluster, minus deleting nodes."),
		cpuLimitsCores:         gaugeVec("cpu_limits_cores", "Minimum and maximum number of cores in the cluster.", "direction"),
		memoryCurrentBytes:     gauge("cluster_memory_current_bytes", "Current number of bytes of memory in the cluster, minus deleting nodes."),
		memoryLimitsBytes:      gaugeVec("memory_limits_bytes", "Minimum and maximum number of bytes of memory in cluster.", "direction"),

		perNodeGroup:           opts.EmitPerNodeGroupMetrics,
		nodeGroupMinCount:      gaugeVec("node_group_min_count", "Minimum number of nodes in the node group", "node_group"),
		nodeGroupMaxCount:      gaugeVec("node_group_max_count", "Maximum number of nodes in the node group", "node_group"),
		nodeGroupTargetCount:   gaugeVec("node_group_target_count", "Target number of nodes in the node group by CA.", "node_group"),
		nodeGroupHealthiness:   gaugeVec("node_group_healthiness", "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise.", "node_group"),
		nodeGroupBackoffStatus: gaugeVec("node_group_backoff_status", "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise.", "node_group", "reason"),

		lastActivity: gaugeVec("last_activity", "Last time certain part of CA logic executed.", "activity"),
		functionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "function_duration_seconds",
			Help:    "Time taken by various parts of CA main loop.",
			Buckets: prometheus.ExponentialBucketsRange(0.1, 1800, 150),
		}, []string{"function"}),
		functionDurationSummary: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Namespace: namespace, Name: "function_duration_quantile_seconds",
			Help:   "Quantiles of time taken by various parts of CA main loop.",
			MaxAge: 3600e9, // an hour, as upstream
		}, []string{"function"}),
		errorsCount: counterVec("errors_total", "The number of CA loops failed due to an error.", "type"),

		scaledUpNodes:           counterVec("scaled_up_nodes_total", "Number of nodes added by CA.", gpuLabels...),
		failedScaleUps:          counterVec("failed_scale_ups_total", "Number of times scale-up operation has failed.", append([]string{"reason"}, gpuLabels...)...),
		failedNodeCreations:     counterVec("failed_node_creations_total", "Number of nodes which failed to be added by CA.", "reason"),
		scaledDownNodes:         counterVec("scaled_down_nodes_total", "Number of nodes removed by CA.", append([]string{"reason"}, gpuLabels...)...),
		evictedPods:             counterVec("evicted_pods_total", "Number of pods evicted by CA", "eviction_result"),
		unneededNodesCount:      gauge("unneeded_nodes_count", "Number of nodes currently considered unneeded by CA."),
		unremovableNodesCount:   gaugeVec("unremovable_nodes_count", "Number of nodes currently considered unremovable by CA.", "reason"),
		scaleDownInCooldown:     gauge("scale_down_in_cooldown", "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise."),
		oldUnregisteredRemoved:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "old_unregistered_nodes_removed_count", Help: "Number of unregistered nodes removed by CA."}),
		maxNodeSkipEvalDuration: gauge("max_node_skip_eval_duration_seconds", "Maximum evaluation time of a node being skipped during ScaleDown."),
		nodeRemovalLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "node_removal_latency_seconds",
			Help:    "Latency from when an unneeded node is eligible for scale down until it is removed (deleted=true) or it became needed again (deleted=false).",
			Buckets: prometheus.ExponentialBuckets(1, 1.5, 19),
		}, []string{"deleted", "delay_reason"}),
		SkippedScaleEvents: counterVec("skipped_scale_events_count", "Count of scaling events that the CA has chosen to skip.", "direction", "reason"),

		staleDataSkippedLoops: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "quotascale", Subsystem: "autoscaler", Name: "stale_data_skipped_loops_total",
			Help: "Loops that scaled nothing because the API server was unreachable for longer than --max-stale-data.",
		}),
		failedScaleDowns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "quotascale", Subsystem: "autoscaler", Name: "failed_scale_downs_total",
			Help: "Number of node removals that failed and were rolled back.",
		}),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.clusterSafeToAutoscale, m.nodesCount, m.nodeGroupsCount, m.unschedulablePodsCount, m.maxNodesCount,
		m.cpuCurrentCores, m.cpuLimitsCores, m.memoryCurrentBytes, m.memoryLimitsBytes,
		m.lastActivity, m.functionDuration, m.functionDurationSummary, m.errorsCount,
		m.scaledUpNodes, m.failedScaleUps, m.failedNodeCreations, m.scaledDownNodes, m.evictedPods,
		m.unneededNodesCount, m.unremovableNodesCount, m.scaleDownInCooldown, m.oldUnregisteredRemoved,
		m.maxNodeSkipEvalDuration, m.nodeRemovalLatency,
		m.SkippedScaleEvents, m.staleDataSkippedLoops, m.failedScaleDowns,
	)
	if m.perNodeGroup {
		m.Registry.MustRegister(m.nodeGroupMinCount, m.nodeGroupMaxCount, m.nodeGroupTargetCount,
			m.nodeGroupHealthiness, m.nodeGroupBackoffStatus)
	}
	m.initialize()
	return m
}

// Label values upstream initializes or sets, in its words.
const (
	// Errors of a loop (errors_total's type).
	CloudProviderError            = "cloudProviderError"
	APICallError                  = "apiCallError"
	InternalError                 = "internalError"
	TransientError                = "transientError"
	ConfigurationError            = "configurationError"
	NodeGroupDoesNotExistError    = "nodeGroupDoesNotExistError"
	UnexpectedScaleDownStateError = "unexpectedScaleDownStateError"

	// Failed scale-ups (failed_scale_ups_total's reason): an IncreaseSize
	// error, nodes that did not register in time, and otherwise the error
	// code of the failed instances.
	FailedScaleUpCloudProviderError = "cloudProviderError"
	FailedScaleUpAPIError           = "apiCallError"
	FailedScaleUpTimeout            = "timeout"

	// Node removals (scaled_down_nodes_total's reason).
	ScaleDownUnderutilized = "underutilized"
	ScaleDownEmpty         = "empty"
	ScaleDownUnready       = "unready"

	// Pod evictions (evicted_pods_total's eviction_result).
	EvictionSucceeded = "succeeded"
	EvictionFailed    = "failed"

	// Skipped scale events (skipped_scale_events_count's direction and the
	// reasons upstream knows; the CapacityQuota processor adds one for every
	// other resource in the same form, as NvidiaComGpuResourceLimit).
	DirectionUp         = "up"
	DirectionDown       = "down"
	CPUResourceLimit    = "CpuResourceLimit"
	MemoryResourceLimit = "MemoryResourceLimit"
)

// initialize gives upstream's initialized series their zero (InitMetrics).
func (m *Metrics) initialize() {
	for _, t := range []string{CloudProviderError, APICallError, InternalError, TransientError, ConfigurationError,
		NodeGroupDoesNotExistError, UnexpectedScaleDownStateError} {
		m.errorsCount.WithLabelValues(t)
	}
	// Not initialized upstream, which exports it from the first scale-up on:
	// the series a scale-up of nodes without a GPU counts on.
	m.scaledUpNodes.WithLabelValues("", "", "")
	for _, r := range []string{FailedScaleUpCloudProviderError, FailedScaleUpAPIError, FailedScaleUpTimeout} {
		m.failedScaleUps.WithLabelValues(r, "", "", "")
		m.failedNodeCreations.WithLabelValues(r)
	}
	for _, r := range []string{ScaleDownUnderutilized, ScaleDownEmpty, ScaleDownUnready} {
		m.scaledDownNodes.WithLabelValues(r, "", "", "")
	}
	for _, r := range []string{EvictionSucceeded, EvictionFailed} {
		m.evictedPods.WithLabelValues(r)
	}
	for _, d := range []string{DirectionDown, DirectionUp} {
		m.SkippedScaleEvents.WithLabelValues(d, CPUResourceLimit)
		m.SkippedScaleEvents.WithLabelValues(d, MemoryResourceLimit)
	}
}
