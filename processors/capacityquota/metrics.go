package capacityquota

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/capacity"
)

// Metrics are the quotas' gauges and the blocked scale-up counters. Alert rules
// (charts/quotascale/files/alerts.yaml) are written against these names.
type Metrics struct {
	limit, used, upcoming *prometheus.GaugeVec
	valid                 *prometheus.GaugeVec
	blockedTotal          *prometheus.CounterVec
	gangSkippedTotal      *prometheus.CounterVec
	// skipped is upstream's cluster_autoscaler_skipped_scale_events_count,
	// shared with the autoscaler's registry.
	skipped *prometheus.CounterVec
}

// NewMetrics registers the quota metrics; skipped is the autoscaler's
// skipped_scale_events_count.
func NewMetrics(reg prometheus.Registerer, skipped *prometheus.CounterVec) *Metrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "quotascale", Subsystem: "capacity_quota", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		limit:    gauge("limit", "Limit of a CapacityQuota per resource (cpu in cores, memory in bytes, nodes, extended resources in units).", "quota", "resource"),
		used:     gauge("used", "Summed capacity of the registered nodes a CapacityQuota selects.", "quota", "resource"),
		upcoming: gauge("upcoming", "Capacity of the selected nodes still being provisioned or planned.", "quota", "resource"),
		valid:    gauge("valid", "1 when the CapacityQuota is valid and enforced, 0 when it is invalid.", "quota"),
		blockedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "quotascale", Subsystem: "capacity_quota", Name: "scale_up_blocked_total",
			Help: "Scale-ups of a node group capped or skipped because a CapacityQuota had no headroom on a resource.",
		}, []string{"quota", "resource", "node_group"}),
		gangSkippedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "quotascale", Subsystem: "capacity_quota", Name: "gang_scale_up_skipped_total",
			Help: "Gangs given no node of a node group because a CapacityQuota allowed fewer nodes than the gang needs, by quota and resource.",
		}, []string{"quota", "resource"}),
		skipped: skipped,
	}
	reg.MustRegister(m.limit, m.used, m.upcoming, m.valid, m.blockedTotal, m.gangSkippedTotal)
	return m
}

func (m *Metrics) blocked(quota, resource, group string) {
	if m == nil {
		return
	}
	m.blockedTotal.WithLabelValues(quota, resource, group).Inc()
	if m.skipped != nil {
		m.skipped.WithLabelValues("up", skipReason(resource)).Inc()
	}
}

// skipReason follows upstream's reasons, CpuResourceLimit and
// MemoryResourceLimit, for every resource: nvidia.com/gpu gives
// NvidiaComGpuResourceLimit.
func skipReason(resource string) string {
	var b strings.Builder
	upper := true
	for _, r := range resource {
		if r == '.' || r == '/' || r == '-' || r == '_' {
			upper = true
			continue
		}
		if upper && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		upper = false
		b.WriteRune(r)
	}
	return b.String() + "ResourceLimit"
}

// observe sets the gauges from the set's status; limits come from the objects.
func (m *Metrics) observe(statuses []capacity.QuotaStatus, objects map[string]*autoscalingv1beta1.CapacityQuota, clusterWide autoscalingv1beta1.ResourceList) {
	if m == nil {
		return
	}
	m.limit.Reset()
	m.used.Reset()
	m.upcoming.Reset()
	m.valid.Reset()
	for _, s := range statuses {
		var limits autoscalingv1beta1.ResourceList
		if obj := objects[s.Name]; obj != nil {
			limits = obj.Spec.Limits.Resources
		} else if s.Name == capacity.ClusterWideName {
			limits = clusterWide
		}
		v := 0.0
		if s.Valid {
			v = 1
		}
		m.valid.WithLabelValues(s.Name).Set(v)
		if !s.Valid {
			continue
		}
		// Base units: cores for cpu, bytes for memory, counts otherwise.
		for name, limit := range limits {
			used, upcoming := s.Used[corev1.ResourceName(name)], s.Upcoming[corev1.ResourceName(name)]
			m.limit.WithLabelValues(s.Name, string(name)).Set(limit.AsApproximateFloat64())
			m.used.WithLabelValues(s.Name, string(name)).Set(used.AsApproximateFloat64())
			m.upcoming.WithLabelValues(s.Name, string(name)).Set(upcoming.AsApproximateFloat64())
		}
	}
}
