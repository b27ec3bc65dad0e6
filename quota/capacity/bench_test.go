package capacity

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

const (
	benchNodesPerGroup = 5
	benchWanted        = 10
)

// fleetSize scales the fleet: quotas of every kind grow with the groups.
type fleetSize struct {
	groups, quotas int
	upcoming       int // groups with nodes still provisioning
}

// fleetSizes are the curve of docs/performance.md; the last is the target size.
var fleetSizes = []fleetSize{
	{groups: 100, quotas: 50, upcoming: 10},
	{groups: 300, quotas: 150, upcoming: 30},
	{groups: 1000, quotas: 500, upcoming: 100},
}

// fleet is a cluster shaped like a large autoscaled one: node groups whose
// nodes share labels except their hostname, and quotas keyed on classes,
// pools, zones, machine families, teams and single node groups, plus two
// that match nearly everything. A node group matches about eight quotas.
type fleet struct {
	size      fleetSize
	groups    []string // node group names
	quotas    []*autoscalingv1beta1.CapacityQuota
	templates []*corev1.Node
	nodes     []*corev1.Node
}

func groupLabels(g int) map[string]string {
	return map[string]string{
		"node-group":                      fmt.Sprintf("g-%d", g),
		"pool":                            fmt.Sprintf("p-%d", g%50),
		"topology.kubernetes.io/zone":     fmt.Sprintf("z-%d", g%3),
		"cloud.google.com/compute-class":  fmt.Sprintf("c-%d", g%100),
		"cloud.google.com/machine-family": fmt.Sprintf("f-%d", g%10),
		"team":                            fmt.Sprintf("t-%d", g%35),
		"kubernetes.io/os":                "linux",
		"kubernetes.io/arch":              "amd64",
	}
}

func newFleet(size fleetSize) *fleet {
	f := &fleet{size: size}
	scaled := func(n int) int { return max(1, n*size.groups/1000) }
	for g := range size.groups {
		capacity := coreList("cpu", fmt.Sprint(2*(g%8+1)), "memory", fmt.Sprintf("%dGi", 8*(g%8+1)), "pods", "110")
		if g%10 == 0 {
			capacity["nvidia.com/gpu"] = coreList("x", "4")["x"]
		}
		template := node(fmt.Sprintf("template-g-%d", g), withHostname(groupLabels(g), fmt.Sprintf("template-g-%d", g)), capacity)
		f.templates = append(f.templates, template)
		f.groups = append(f.groups, fmt.Sprintf("g-%d", g))
		for i := range benchNodesPerGroup {
			name := fmt.Sprintf("g-%d-n-%d", g, i)
			f.nodes = append(f.nodes, node(name, withHostname(groupLabels(g), name), capacity))
		}
	}
	add := func(name string, selector *metav1.LabelSelector, limits autoscalingv1beta1.ResourceList) {
		f.quotas = append(f.quotas, capacityQuota(name, selector, limits))
	}
	for i := range scaled(100) {
		add(fmt.Sprintf("class-%d", i), matchLabels("cloud.google.com/compute-class", fmt.Sprintf("c-%d", i)), limits("cpu", "1000", "memory", "4Ti"))
	}
	for i := range scaled(50) {
		add(fmt.Sprintf("pool-%d", i), matchLabels("pool", fmt.Sprintf("p-%d", i)), limits("cpu", "2000", "nodes", "120"))
	}
	for i := range 3 {
		add(fmt.Sprintf("zone-%d", i), matchLabels("topology.kubernetes.io/zone", fmt.Sprintf("z-%d", i)), limits("cpu", "20000", "memory", "80Ti", "nodes", "2000"))
	}
	for i := range 10 {
		add(fmt.Sprintf("family-%d", i), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "cloud.google.com/machine-family", Operator: metav1.LabelSelectorOpIn,
			Values: []string{fmt.Sprintf("f-%d", i), fmt.Sprintf("f-%d", (i+1)%10)},
		}}}, limits("nvidia.com/gpu", "2100", "cpu", "20000"))
	}
	for i := range scaled(300) {
		add(fmt.Sprintf("group-%d", i), matchLabels("node-group", fmt.Sprintf("g-%d", 3*i)), limits("nodes", "20", "cpu", "200"))
	}
	add(ClusterWideName, nil, limits("cpu", "100000", "memory", "400Ti", "nodes", "10000"))
	add("not-experimental", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "cloud.google.com/compute-class", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"c-99"},
	}}}, limits("cpu", "90000"))
	for i := range size.quotas - len(f.quotas) {
		add(fmt.Sprintf("team-%d", i), matchLabels("team", fmt.Sprintf("t-%d", i)), limits("cpu", "2000", "memory", "8Ti"))
	}
	return f
}

// upcomingCount varies per loop so every loop really replaces the upcoming
// contributions.
func upcomingCount(loop, g int) int { return 1 + (loop+g)%3 }

// indexedCheck is one autoscaler loop with the Set: refresh the upcoming
// groups, then ask about every node group.
func (f *fleet) indexedCheck(set *Set, loop int, ks []int) {
	for g := range f.size.upcoming {
		set.SetUpcoming(f.groups[g], upcomingCount(loop, g), f.templates[g])
	}
	for g, template := range f.templates {
		ks[g], _ = set.AllowedDelta(template, benchWanted)
	}
}

// rescanCheck is the same loop the way the upstream autoscaler does it:
// recompute every quota's usage by matching every node against every
// selector, then match every template against every selector.
func (f *fleet) rescanCheck(selectors []labels.Selector, loop int, ks []int) {
	usage := make([]map[corev1.ResourceName]int64, len(f.quotas))
	for qi := range f.quotas {
		usage[qi] = map[corev1.ResourceName]int64{}
		for _, n := range f.nodes {
			if selectors[qi].Matches(labels.Set(n.Labels)) {
				addCapacity(usage[qi], n, 1)
			}
		}
		for g := range f.size.upcoming {
			if selectors[qi].Matches(labels.Set(f.templates[g].Labels)) {
				addCapacity(usage[qi], f.templates[g], int64(upcomingCount(loop, g)))
			}
		}
	}
	for g, template := range f.templates {
		k := int64(benchWanted)
		for qi, q := range f.quotas {
			if !selectors[qi].Matches(labels.Set(template.Labels)) {
				continue
			}
			per := map[corev1.ResourceName]int64{}
			addCapacity(per, template, 1)
			for name, limit := range q.Spec.Limits.Resources {
				r := corev1.ResourceName(name)
				if per[r] > 0 {
					k = min(k, max(0, resources.Units(r, limit)-usage[qi][r])/per[r])
				}
			}
		}
		ks[g] = int(k)
	}
}

func addCapacity(usage map[corev1.ResourceName]int64, n *corev1.Node, count int64) {
	for name, q := range n.Status.Capacity {
		units := resources.Units(name, q)
		if name == corev1.ResourceCPU {
			units = wholeCores(units)
		}
		usage[name] += count * units
	}
	usage["nodes"] += count
}

func (f *fleet) newSet() *Set {
	set := Build(f.quotas, Options{})
	for _, n := range f.nodes {
		set.AddNode(n)
	}
	return set
}

func (f *fleet) selectors() []labels.Selector {
	out := make([]labels.Selector, len(f.quotas))
	for i, q := range f.quotas {
		out[i], _ = metav1.LabelSelectorAsSelector(q.Spec.Selector)
	}
	return out
}

// TestRescanBaselineAgrees keeps the benchmark honest: both loops must reach
// the same answer for every node group.
func TestRescanBaselineAgrees(t *testing.T) {
	f := newFleet(fleetSizes[len(fleetSizes)-1])
	set, selectors := f.newSet(), f.selectors()
	indexed, rescanned := make([]int, f.size.groups), make([]int, f.size.groups)
	limited := 0
	for loop := range 3 {
		f.indexedCheck(set, loop, indexed)
		f.rescanCheck(selectors, loop, rescanned)
		for g := range indexed {
			if indexed[g] != rescanned[g] {
				t.Fatalf("loop %d group %d: indexed %d, rescan %d", loop, g, indexed[g], rescanned[g])
			}
			if indexed[g] < benchWanted {
				limited++
			}
		}
	}
	// Some groups are capped, most are not, as in a healthy cluster.
	if limited == 0 || limited > len(indexed)*3/2 {
		t.Errorf("%d of %d group checks limited; the fleet should cap some groups, not most", limited, 3*len(indexed))
	}
	t.Logf("%d of %d group checks limited", limited, 3*len(indexed))
}

// BenchmarkCapacityCheck measures one autoscaler loop's quota work: every
// node group template against every quota, a tenth of the groups with
// upcoming nodes; at the largest size 1,000 groups against 500 quotas over
// 5,000 nodes.
func BenchmarkCapacityCheck(b *testing.B) {
	for _, size := range fleetSizes {
		benchmarkCapacityCheck(b, size)
	}
}

func benchmarkCapacityCheck(b *testing.B, size fleetSize) {
	f := newFleet(size)
	ks := make([]int, size.groups)
	name := fmt.Sprintf("groups=%d/quotas=%d/nodes=%d", len(f.groups), len(f.quotas), len(f.nodes))
	b.Run(name+"/check=indexed", func(b *testing.B) {
		set := f.newSet()
		b.ReportAllocs()
		loop := 0
		for b.Loop() {
			f.indexedCheck(set, loop, ks)
			loop++
		}
	})
	b.Run(name+"/check=rescan", func(b *testing.B) {
		selectors := f.selectors()
		b.ReportAllocs()
		loop := 0
		for b.Loop() {
			f.rescanCheck(selectors, loop, ks)
			loop++
		}
	})
}

// BenchmarkAllowedDelta is one template's check on the same fleet.
func BenchmarkAllowedDelta(b *testing.B) {
	f := newFleet(fleetSizes[len(fleetSizes)-1])
	set := f.newSet()
	b.ReportAllocs()
	g := 0
	for b.Loop() {
		set.AllowedDelta(f.templates[g%f.size.groups], benchWanted)
		g++
	}
}
