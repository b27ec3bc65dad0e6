package capacity

import (
	"fmt"
	"math/rand/v2"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// The upstream-shaped fleet is the workload issue 19 measured upstream's
// tracker on: node groups carry 4-6 labels drawn from 53 values over 16 keys,
// and quota selectors are narrowed until each matches 1-10% of the nodes, so a
// group matches several dozen quotas instead of ours' eight.
const upstreamSeed = 19

// upstreamKeys are the 16 keys; the first five have four values, the others
// three: 5*4 + 11*3 = 53 values.
var upstreamKeys = []string{
	"topology.kubernetes.io/zone", "example.com/team", "example.com/cost-center", "cloud.google.com/compute-class",
	"cloud.google.com/machine-family", "example.com/env", "example.com/tier", "example.com/pool",
	"example.com/workload", "example.com/capacity-type", "example.com/gpu-type", "example.com/region",
	"example.com/instance-size", "example.com/network", "example.com/storage", "example.com/owner",
}

func upstreamValues(key int) []string {
	n := 3
	if key < 5 {
		n = 4
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("v%d-%d", key, i)
	}
	return out
}

// newUpstreamFleet generates the fleet from seed; the same seed and size give
// the same fleet.
func newUpstreamFleet(size fleetSize, seed uint64) *fleet {
	rng := rand.New(rand.NewPCG(seed, uint64(size.groups)))
	f := &fleet{size: size}
	groupSets := make([]labels.Set, size.groups)
	perGroup := size.nodes / size.groups
	for g := range size.groups {
		groupSets[g] = drawGroupLabels(rng)
		cores := 2 * (1 + rng.IntN(8))
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(cores), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(cores)*4<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		}
		if groupSets[g]["example.com/gpu-type"] != "" {
			capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(1+rng.IntN(8)), resource.DecimalSI)
		}
		f.addGroup(fmt.Sprintf("g-%d", g), groupSets[g], capacity, perGroup)
	}
	var selectors []labels.Selector
	for i := range size.quotas {
		selector, spec := narrowedSelector(rng, groupSets)
		selectors = append(selectors, selector)
		f.quotas = append(f.quotas, capacityQuota(fmt.Sprintf("q-%04d", i), spec, nil))
	}
	f.setLimits(rng, selectors)
	return f
}

func drawGroupLabels(rng *rand.Rand) labels.Set {
	keys := rng.Perm(len(upstreamKeys))[:4+rng.IntN(3)]
	out := labels.Set{}
	for _, k := range keys {
		values := upstreamValues(k)
		out[upstreamKeys[k]] = values[rng.IntN(len(values))]
	}
	return out
}

// narrowedSelector draws a selector of one requirement and adds requirements
// until it matches between 1% and a share drawn from 1-10% of the groups (all
// groups have as many nodes), and starts over when it falls below 1%.
func narrowedSelector(rng *rand.Rand, groups []labels.Set) (labels.Selector, *metav1.LabelSelector) {
	target := 0.07 + 0.03*rng.Float64()
	for {
		spec := &metav1.LabelSelector{}
		for range 8 {
			addRequirement(rng, spec)
			selector, err := metav1.LabelSelectorAsSelector(spec)
			if err != nil {
				panic(err)
			}
			share := matchedShare(selector, groups)
			if share < 0.01 {
				break
			}
			if share <= target {
				return selector, spec
			}
		}
	}
}

func matchedShare(selector labels.Selector, groups []labels.Set) float64 {
	matched := 0
	for _, g := range groups {
		if selector.Matches(g) {
			matched++
		}
	}
	return float64(matched) / float64(len(groups))
}

func addRequirement(rng *rand.Rand, spec *metav1.LabelSelector) {
	k := rng.IntN(len(upstreamKeys))
	key, values := upstreamKeys[k], upstreamValues(k)
	rng.Shuffle(len(values), func(i, j int) { values[i], values[j] = values[j], values[i] })
	r := metav1.LabelSelectorRequirement{Key: key}
	switch rng.IntN(5) {
	case 0:
		if spec.MatchLabels == nil {
			spec.MatchLabels = map[string]string{}
		}
		spec.MatchLabels[key] = values[0]
		return
	case 1:
		r.Operator, r.Values = metav1.LabelSelectorOpIn, values[:2]
	case 2:
		r.Operator, r.Values = metav1.LabelSelectorOpNotIn, values[:1]
	case 3:
		r.Operator = metav1.LabelSelectorOpExists
	default:
		r.Operator = metav1.LabelSelectorOpDoesNotExist
	}
	slices.Sort(r.Values)
	spec.MatchExpressions = append(spec.MatchExpressions, r)
}

// setLimits limits one to three resources of each quota at 1.5 times what its
// registered nodes use (odd groups' extra nodes included, see churn), then fills quotas, in a random order, to exactly their
// usage until about 15% of the groups match a full one and are refused.
func (f *fleet) setLimits(rng *rand.Rand, selectors []labels.Selector) {
	perGroup := int64(f.size.nodes / f.size.groups)
	usage := make([]map[corev1.ResourceName]int64, len(f.quotas))
	matches := make([][]int, len(f.quotas)) // groups per quota
	for qi := range f.quotas {
		usage[qi] = map[corev1.ResourceName]int64{}
		for g, template := range f.templates {
			if selectors[qi].Matches(labels.Set(template.Labels)) {
				addCapacity(usage[qi], template, perGroup+int64(g%2))
				matches[qi] = append(matches[qi], g)
			}
		}
	}
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nodes", "nvidia.com/gpu"}
	for qi, q := range f.quotas {
		q.Spec.Limits.Resources = autoscalingv1beta1.ResourceList{}
		for _, pos := range rng.Perm(len(names))[:1+rng.IntN(3)] {
			q.Spec.Limits.Resources[autoscalingv1beta1.ResourceName(names[pos])] = limitQuantity(names[pos], usage[qi][names[pos]]*3/2)
		}
	}
	refused := make([]bool, len(f.templates))
	count, low, high := 0, 14*len(f.templates)/100, 15*len(f.templates)/100
	for _, qi := range rng.Perm(len(f.quotas)) {
		if count >= low {
			break
		}
		q := f.quotas[qi]
		var more []int
		for _, g := range matches[qi] {
			if !refused[g] && constrains(q, f.templates[g]) {
				more = append(more, g)
			}
		}
		if count+len(more) > high {
			continue
		}
		for name := range q.Spec.Limits.Resources {
			q.Spec.Limits.Resources[name] = limitQuantity(corev1.ResourceName(name), usage[qi][corev1.ResourceName(name)])
		}
		for _, g := range more {
			refused[g] = true
		}
		count += len(more)
	}
}

// constrains tells whether a full quota refuses template: it limits a resource
// the template has.
func constrains(q *autoscalingv1beta1.CapacityQuota, template *corev1.Node) bool {
	for name := range q.Spec.Limits.Resources {
		if name == "nodes" {
			return true
		}
		if c, ok := template.Status.Capacity[corev1.ResourceName(name)]; ok && !c.IsZero() {
			return true
		}
	}
	return false
}

// limitQuantity writes units as a limit: whole cores for cpu (addCapacity
// counts millicores), bytes or counts otherwise.
func limitQuantity(name corev1.ResourceName, units int64) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewQuantity(units/1000, resource.DecimalSI)
	}
	return *resource.NewQuantity(units, resource.DecimalSI)
}
