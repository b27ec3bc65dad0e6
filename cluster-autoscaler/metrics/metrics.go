// Package metrics holds the autoscaler's Prometheus metrics. Names follow
// upstream's cluster_autoscaler_* metrics where they exist, so dashboards keep
// working; Quotascale's own are prefixed quotascale_.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are registered on their own registry, served at /metrics.
type Metrics struct {
	Registry *prometheus.Registry

	// LoopDuration is upstream's function_duration_seconds, per phase.
	LoopDuration *prometheus.HistogramVec
	// UnschedulablePods is upstream's unschedulable_pods_count.
	UnschedulablePods prometheus.Gauge
	// ScaledUpNodes is upstream's scaled_up_nodes_total.
	ScaledUpNodes prometheus.Counter
	// FailedScaleUps is upstream's failed_scale_ups_total.
	FailedScaleUps *prometheus.CounterVec
	// SkippedScaleEvents is upstream's skipped_scale_events_count, with every
	// limiting resource as a reason rather than only cpu and memory.
	SkippedScaleEvents *prometheus.CounterVec
	// NodeGroupTarget and NodesCount describe the cluster.
	NodeGroupTarget *prometheus.GaugeVec
	NodesCount      *prometheus.GaugeVec
	// LastActivity is upstream's last_activity, per activity.
	LastActivity *prometheus.GaugeVec
	// ScaledDownNodes, FailedScaleDowns and UnneededNodes are upstream's
	// scaled_down_nodes_total, failed_scale_downs_total and unneeded_nodes_count.
	ScaledDownNodes  prometheus.Counter
	FailedScaleDowns prometheus.Counter
	UnneededNodes    prometheus.Gauge
	// SkippedLoops counts loops that scaled nothing because the cluster data was
	// too old.
	SkippedLoops prometheus.Counter
}

// New registers every metric on a fresh registry, with the Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		LoopDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "cluster_autoscaler", Name: "function_duration_seconds",
			Help:    "Time taken by the parts of the autoscaler loop.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"function"}),
		UnschedulablePods: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cluster_autoscaler", Name: "unschedulable_pods_count",
			Help: "Number of unschedulable pods in the cluster.",
		}),
		ScaledUpNodes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cluster_autoscaler", Name: "scaled_up_nodes_total",
			Help: "Number of nodes added by the autoscaler.",
		}),
		FailedScaleUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cluster_autoscaler", Name: "failed_scale_ups_total",
			Help: "Number of times a scale-up failed.",
		}, []string{"reason"}),
		SkippedScaleEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cluster_autoscaler", Name: "skipped_scale_events_count",
			Help: "Number of times a scale-up or scale-down was skipped because a limit was reached.",
		}, []string{"direction", "reason"}),
		NodeGroupTarget: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "cluster_autoscaler", Name: "node_group_target_count",
			Help: "Target size of each node group.",
		}, []string{"node_group"}),
		NodesCount: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "cluster_autoscaler", Name: "nodes_count",
			Help: "Number of nodes by state.",
		}, []string{"state"}),
		LastActivity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "cluster_autoscaler", Name: "last_activity",
			Help: "Last time an activity happened, as a Unix timestamp.",
		}, []string{"activity"}),
		ScaledDownNodes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cluster_autoscaler", Name: "scaled_down_nodes_total",
			Help: "Number of nodes removed by the autoscaler.",
		}),
		FailedScaleDowns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cluster_autoscaler", Name: "failed_scale_downs_total",
			Help: "Number of node removals that failed and were rolled back.",
		}),
		UnneededNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cluster_autoscaler", Name: "unneeded_nodes_count",
			Help: "Number of nodes currently unneeded and candidates for removal.",
		}),
	}
	m.SkippedLoops = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "quotascale", Subsystem: "autoscaler", Name: "stale_data_skipped_loops_total",
		Help: "Loops that scaled nothing because the API server was unreachable for longer than --max-stale-data.",
	})
	m.Registry.MustRegister(m.SkippedLoops, m.ScaledDownNodes, m.FailedScaleDowns, m.UnneededNodes,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.LoopDuration, m.UnschedulablePods, m.ScaledUpNodes, m.FailedScaleUps,
		m.SkippedScaleEvents, m.NodeGroupTarget, m.NodesCount, m.LastActivity,
	)
	return m
}
