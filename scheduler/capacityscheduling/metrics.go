package capacityscheduling

import (
	"sort"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/quotascale/quotascale/quota/elastic"
)

// The plugin's metrics, served with kube-scheduler's own on its /metrics. Alert
// rules (charts/quotascale/files/alerts.yaml) are written against these names.
// Quota node names come from the tree, so label cardinality is bounded by the
// tree's size times its resources.
const (
	metricsNamespace = "quotascale"
	metricsSubsystem = "elastic_quota"

	// Results of a reclaim, the label of reclaims_total.
	reclaimStarted = "started" // victims chosen and being evicted
	reclaimPlaced  = "placed"  // the preemptor was bound
	reclaimFailed  = "failed"  // the preemptor's leaf was owed its min, but no preemption could be started
	reclaimExpired = "expired" // the preemptor was not placed within the hold's lifetime
)

var (
	admittedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "admitted_total",
		Help:           "Scheduling attempts the ElasticQuotaTree admitted, by the pod's leaf.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"quota_node"})
	refusedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "refused_total",
		Help:           "Scheduling attempts the ElasticQuotaTree refused, once per quota node and resource the request would take past max.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"quota_node", "resource"})
	reclaimsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "reclaims_total",
		Help:           "Reclaims of a leaf's guaranteed min by result: started, placed (the preemptor was bound), failed (no preemption could be started), expired (the preemptor was not placed in time).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"quota_node", "result"})

	quotaLabels = []string{"quota_node", "resource"}
	usedDesc    = metrics.NewDesc(metricsNamespace+"_"+metricsSubsystem+"_used",
		"Requests charged to a quota node (its subtree's bound pods plus quota held for a reclaim); cpu in cores, memory in bytes.",
		quotaLabels, nil, metrics.ALPHA, "")
	minDesc = metrics.NewDesc(metricsNamespace+"_"+metricsSubsystem+"_min",
		"Guaranteed min of a quota node, for every resource its min names.", quotaLabels, nil, metrics.ALPHA, "")
	maxDesc = metrics.NewDesc(metricsNamespace+"_"+metricsSubsystem+"_max",
		"Max of a quota node, for every resource it limits.", quotaLabels, nil, metrics.ALPHA, "")
	borrowedDesc = metrics.NewDesc(metricsNamespace+"_"+metricsSubsystem+"_borrowed",
		"How far a quota node's used is above its min (0 when it is not).", quotaLabels, nil, metrics.ALPHA, "")
	pendingDesc = metrics.NewDesc(metricsNamespace+"_"+metricsSubsystem+"_pending_pods",
		"Pods whose last scheduling attempt the ElasticQuotaTree refused because they would take this quota node past its max on this resource.",
		quotaLabels, nil, metrics.ALPHA, "")
	validDesc = metrics.NewDesc(metricsNamespace+"_"+metricsSubsystem+"_tree_valid",
		"1 when the current generation of an ElasticQuotaTree (namespace/name) is valid, 0 when it is not.",
		[]string{"tree"}, nil, metrics.ALPHA, "")
)

// pluginMetrics records the plugin's counters. A nil *pluginMetrics records
// nothing: the autoscaler's scale-up simulation runs the plugin too, and its
// what-ifs are not the scheduler's decisions.
type pluginMetrics struct{}

var (
	registerOnce sync.Once
	collector    = &quotaCollector{}
)

// newPluginMetrics registers the metrics on kube-scheduler's registry, once per
// process, and points the gauges at c: the most recently started plugin is the
// one the process's /metrics describes.
func newPluginMetrics(c *quotaCache) *pluginMetrics {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(admittedTotal, refusedTotal, reclaimsTotal)
		legacyregistry.CustomMustRegister(collector)
	})
	collector.source.Store(c)
	return &pluginMetrics{}
}

// decidedLocked counts a quota decision about pod and remembers a refusal
// until the pod is admitted, bound or deleted, for pending_pods. The caller
// holds the cache's lock.
func (c *quotaCache) decidedLocked(pod types.UID, v elastic.Verdict) {
	if c.metrics == nil || !v.Governed() {
		return
	}
	if v.Admitted() {
		counter, ok := c.admitted[v.Leaf]
		if !ok {
			// Resolving the labels is most of what counting costs on the
			// admission path; leaves are few.
			counter = admittedTotal.WithLabelValues(v.Leaf)
			c.admitted[v.Leaf] = counter
		}
		counter.Inc()
		delete(c.refused, pod)
		return
	}
	var blocked []quotaResource
	for _, e := range v.Excesses {
		for _, r := range e.Resources {
			refusedTotal.WithLabelValues(e.Node, string(r.Resource)).Inc()
			blocked = append(blocked, quotaResource{e.Node, r.Resource})
		}
	}
	c.refused[pod] = blocked
}

// forgetNodesLocked deletes the counter series of the quota nodes of prev
// that next lacks (all of them when next is nil): the series of a node that
// left the tree in force would otherwise be exported for as long as the
// scheduler runs. The gauges need nothing: they are read off the tree in force
// at scrape time. The caller holds the cache's lock.
func (c *quotaCache) forgetNodesLocked(prev, next *elastic.Tree) {
	if c.metrics == nil || prev == nil {
		return
	}
	for _, n := range prev.Nodes() {
		name := n.Name()
		if next != nil {
			if _, kept := next.Node(name); kept {
				continue
			}
		}
		delete(c.admitted, name)
		node := map[string]string{"quota_node": name}
		admittedTotal.DeletePartialMatch(node)
		refusedTotal.DeletePartialMatch(node)
		reclaimsTotal.DeletePartialMatch(node)
	}
}

// quotaResource is one resource of one quota node.
type quotaResource struct {
	node     string
	resource corev1.ResourceName
}

// reclaimLocked counts a reclaim's result while its leaf is in the tree in
// force: a series for a node that already left would never be deleted. The
// caller holds the cache's lock.
func (c *quotaCache) reclaimLocked(leaf, result string) {
	if c.tree == nil {
		return
	}
	if _, ok := c.tree.Node(leaf); ok {
		c.metrics.reclaim(leaf, result)
	}
}

func (m *pluginMetrics) reclaim(leaf, result string) {
	if m != nil {
		reclaimsTotal.WithLabelValues(leaf, result).Inc()
	}
}

// quotaCollector reads the gauges off the cache at scrape time, so a quota
// node or tree that goes away takes its series with it.
type quotaCollector struct {
	metrics.BaseStableCollector
	source atomic.Pointer[quotaCache]
}

func (q *quotaCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range []*metrics.Desc{usedDesc, minDesc, maxDesc, borrowedDesc, pendingDesc, validDesc} {
		ch <- d
	}
}

func (q *quotaCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c := q.source.Load()
	if c == nil {
		return
	}
	c.mu.Lock()
	var nodes []nodeFigures
	if c.tree != nil {
		for _, s := range c.tree.Status() {
			nodes = append(nodes, nodeFigures{name: s.Name, used: s.Used, min: s.Min, max: s.Max, borrowed: s.Borrowed})
		}
	}
	pending := map[quotaResource]int{}
	for _, blocked := range c.refused {
		for _, b := range blocked {
			if c.tree != nil {
				if _, exists := c.tree.Node(b.node); exists {
					pending[b]++
				}
			}
		}
	}
	valid := make(map[string]bool, len(c.lifecycle.decisions))
	for key, d := range c.lifecycle.decisions {
		valid[key] = d.problems == ""
	}
	c.mu.Unlock()

	for _, n := range nodes {
		gauges(ch, usedDesc, n.name, n.used, nil)
		gauges(ch, minDesc, n.name, n.min, nil)
		gauges(ch, maxDesc, n.name, n.max, nil)
		// Every resource the node uses gets a borrowed figure, 0 included,
		// so that "borrowed > 0" does not depend on a series appearing.
		gauges(ch, borrowedDesc, n.name, n.borrowed, n.used)
	}
	for b, n := range pending {
		ch <- metrics.NewLazyConstMetric(pendingDesc, metrics.GaugeValue, float64(n), b.node, string(b.resource))
	}
	for tree, ok := range valid {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- metrics.NewLazyConstMetric(validDesc, metrics.GaugeValue, v, tree)
	}
}

type nodeFigures struct {
	name                     string
	used, min, max, borrowed corev1.ResourceList
}

// gauges emits one gauge per resource of values, and a 0 for every resource of
// zeroes that values lacks.
func gauges(ch chan<- metrics.Metric, desc *metrics.Desc, node string, values, zeroes corev1.ResourceList) {
	names := make([]corev1.ResourceName, 0, len(values)+len(zeroes))
	for name := range values {
		names = append(names, name)
	}
	for name := range zeroes {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		q := values[name]
		ch <- metrics.NewLazyConstMetric(desc, metrics.GaugeValue, q.AsApproximateFloat64(), node, string(name))
	}
}
