package capacity

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"pgregory.net/rapid"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

var (
	propertyKeys      = []string{"pool", "zone", "class"}
	propertyValues    = []string{"a", "b", "c"}
	propertyResources = []string{"cpu", "memory", "nvidia.com/gpu", "nodes"}
)

func drawLabels(t *rapid.T, label string) map[string]string {
	out := map[string]string{"kubernetes.io/hostname": rapid.StringMatching(`h[0-9]{1,3}`).Draw(t, label+" host")}
	for _, k := range propertyKeys {
		if v := rapid.IntRange(-1, len(propertyValues)-1).Draw(t, label+" "+k); v >= 0 {
			out[k] = propertyValues[v]
		}
	}
	return out
}

func drawSelector(t *rapid.T) *metav1.LabelSelector {
	switch rapid.IntRange(0, 3).Draw(t, "selector kind") {
	case 0:
		return nil
	case 1:
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for _, k := range propertyKeys {
			if rapid.Bool().Draw(t, "match "+k) {
				s.MatchLabels[k] = rapid.SampledFrom(propertyValues).Draw(t, "value")
			}
		}
		return s
	default:
		ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
		op := rapid.SampledFrom(ops).Draw(t, "operator")
		r := metav1.LabelSelectorRequirement{Key: rapid.SampledFrom(propertyKeys).Draw(t, "key"), Operator: op}
		if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
			r.Values = rapid.SliceOfNDistinct(rapid.SampledFrom(propertyValues), 1, 2, rapid.ID).Draw(t, "values")
		}
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{r}}
	}
}

func drawQuota(t *rapid.T, i int) *autoscalingv1beta1.CapacityQuota {
	resources := autoscalingv1beta1.ResourceList{}
	for _, r := range propertyResources {
		if rapid.Bool().Draw(t, "limit "+r) {
			n := rapid.IntRange(0, 40).Draw(t, "amount")
			text := fmt.Sprint(n)
			switch {
			case r == "memory":
				text += "Gi"
			case rapid.IntRange(0, 9).Draw(t, "fractional") == 0:
				text += "500m" // invalid: must not be enforced
			}
			resources[autoscalingv1beta1.ResourceName(r)] = resource.MustParse(text)
		}
	}
	return capacityQuota(fmt.Sprint("q", i), drawSelector(t), resources)
}

func drawNode(t *rapid.T, name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(rapid.IntRange(1, 8000).Draw(t, "cpu")), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(rapid.IntRange(1, 16).Draw(t, "memory"))<<30, resource.BinarySI),
	}
	if gpus := rapid.IntRange(0, 4).Draw(t, "gpus"); gpus > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return node(name, drawLabels(t, name), capacity)
}

// perNodeAmount is an independent restatement of how much one node counts.
func perNodeAmount(n *corev1.Node, r string) int64 {
	if r == "nodes" {
		return 1
	}
	q, ok := n.Status.Capacity[corev1.ResourceName(r)]
	if !ok {
		return 0
	}
	if r == "cpu" {
		return (q.MilliValue() + 999) / 1000 // whole cores, rounded up
	}
	return q.Value()
}

func limitAmount(q resource.Quantity) int64 { return q.Value() }

// upcomingGroup is one node group's upcoming nodes in the reference model.
type upcomingGroup struct {
	count    int
	template *corev1.Node
}

// referenceAllowed restates AllowedDelta from the objects alone: matching
// every node and upcoming group against every valid quota, it returns the
// largest k <= wanted that keeps every matching quota within its limits, and
// when k < wanted the quotas that stop the (k+1)-th node.
func referenceAllowed(set *Set, quotas []*autoscalingv1beta1.CapacityQuota, nodes map[string]*corev1.Node, groups map[string]upcomingGroup, template *corev1.Node, wanted int) (int, map[string]bool) {
	type bound struct {
		quota    string
		headroom int64
		per      int64
	}
	var bounds []bound
	for _, q := range quotas {
		if status, _ := set.Quota(q.Name); !status.Valid {
			continue
		}
		selector := labels.Everything()
		if q.Spec.Selector != nil {
			selector, _ = metav1.LabelSelectorAsSelector(q.Spec.Selector)
		}
		if !selector.Matches(labels.Set(template.Labels)) {
			continue
		}
		for name, limit := range q.Spec.Limits.Resources {
			r := string(name)
			per := perNodeAmount(template, r)
			if per == 0 {
				continue
			}
			var used int64
			for _, n := range nodes {
				if selector.Matches(labels.Set(n.Labels)) {
					used += perNodeAmount(n, r)
				}
			}
			for _, g := range groups {
				if g.count > 0 && selector.Matches(labels.Set(g.template.Labels)) {
					used += int64(g.count) * perNodeAmount(g.template, r)
				}
			}
			bounds = append(bounds, bound{quota: q.Name, headroom: max(0, limitAmount(limit)-used), per: per})
		}
	}
	k := int64(wanted)
	for _, b := range bounds {
		k = min(k, b.headroom/b.per)
	}
	binding := map[string]bool{}
	for _, b := range bounds {
		if k < int64(wanted) && (k+1)*b.per > b.headroom {
			binding[b.quota] = true
		}
	}
	return int(k), binding
}

func TestPropertyAllowedDeltaIsTheLargestSafeCount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var quotas []*autoscalingv1beta1.CapacityQuota
		for i := range rapid.IntRange(1, 6).Draw(t, "quotas") {
			quotas = append(quotas, drawQuota(t, i))
		}
		set := Build(quotas, Options{})
		nodes := map[string]*corev1.Node{}
		groups := map[string]upcomingGroup{}
		for step := range rapid.IntRange(0, 30).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				n := drawNode(t, fmt.Sprint("n", rapid.IntRange(0, 9).Draw(t, "node")))
				set.AddNode(n)
				nodes[n.Name] = n
			case 2:
				name := fmt.Sprint("n", rapid.IntRange(0, 9).Draw(t, "removed"))
				set.RemoveNode(name)
				delete(nodes, name)
			default:
				g := upcomingGroup{count: rapid.IntRange(0, 4).Draw(t, "count"), template: drawNode(t, fmt.Sprint("template", step))}
				name := fmt.Sprint("g", rapid.IntRange(0, 2).Draw(t, "group"))
				set.SetUpcoming(name, g.count, g.template)
				groups[name] = g
			}
		}
		template := drawNode(t, "candidate")
		wanted := rapid.IntRange(1, 20).Draw(t, "wanted")
		k, exceeded := set.AllowedDelta(template, wanted)
		wantK, binding := referenceAllowed(set, quotas, nodes, groups, template, wanted)
		if k != wantK {
			t.Fatalf("k=%d of %d, the largest safe count is %d", k, wanted, wantK)
		}
		if len(exceeded) != len(binding) {
			t.Fatalf("exceeded %+v, binding quotas %v", exceeded, binding)
		}
		for _, e := range exceeded {
			if !binding[e.Quota] {
				t.Fatalf("%s reported as binding but is not", e.Quota)
			}
		}
	})
}
