package capacity

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// Our fleet is a cluster shaped like a large autoscaled one: node groups whose
// nodes share labels except their hostname, and quotas keyed on classes,
// pools, zones, machine families, teams and single node groups, plus two
// that match nearly everything. A node group matches about eight quotas.

func ourGroupLabels(g int) map[string]string {
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

func newOurFleet(size fleetSize) *fleet {
	f := &fleet{size: size}
	scaled := func(n int) int { return max(1, n*size.groups/1000) }
	// Past 5,000 nodes, shared limits grow with the nodes they cover, so the
	// share of capped groups stays what it is at 5,000.
	factor := int64(max(1, size.nodes/5000))
	add := func(name string, selector *metav1.LabelSelector, limits autoscalingv1beta1.ResourceList) {
		for r, q := range limits {
			q.Mul(factor)
			limits[r] = q
		}
		f.quotas = append(f.quotas, capacityQuota(name, selector, limits))
	}
	for g := range size.groups {
		capacity := coreList("cpu", fmt.Sprint(2*(g%8+1)), "memory", fmt.Sprintf("%dGi", 8*(g%8+1)), "pods", "110")
		if g%10 == 0 {
			capacity["nvidia.com/gpu"] = coreList("x", "4")["x"]
		}
		f.addGroup(fmt.Sprintf("g-%d", g), ourGroupLabels(g), capacity, size.nodes/size.groups)
	}
	for i := range scaled(100) {
		add(fmt.Sprintf("class-%d", i), matchLabels("cloud.google.com/compute-class", fmt.Sprintf("c-%d", i)), limits("cpu", "1000", "memory", "4Ti"))
	}
	for i := range scaled(50) {
		add(fmt.Sprintf("pool-%d", i), matchLabels("pool", fmt.Sprintf("p-%d", i)), limits("cpu", "2000", "nodes", "150"))
	}
	for i := range 3 {
		add(fmt.Sprintf("zone-%d", i), matchLabels("topology.kubernetes.io/zone", fmt.Sprintf("z-%d", i)), limits("cpu", "25000", "memory", "80Ti", "nodes", "2500"))
	}
	for i := range 10 {
		add(fmt.Sprintf("family-%d", i), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "cloud.google.com/machine-family", Operator: metav1.LabelSelectorOpIn,
			Values: []string{fmt.Sprintf("f-%d", i), fmt.Sprintf("f-%d", (i+1)%10)},
		}}}, limits("nvidia.com/gpu", "3300", "cpu", "20000"))
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
