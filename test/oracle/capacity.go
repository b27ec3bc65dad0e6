package oracle

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// instanceTypeKeys may not appear in a quota's selector: the autoscaler picks
// instance types per scale-up, so a quota on them is reported invalid.
var instanceTypeKeys = []string{"beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"}

// capacityQuota is one CapacityQuota as the oracle enforces it.
type capacityQuota struct {
	name string
	uid  types.UID
	// selector is nil when the quota is invalid, and then nothing is judged.
	selector labels.Selector
	limits   map[corev1.ResourceName]resource.Quantity
	// changed is when the spec was last written: nodes created since count.
	changed metav1.Time
	// over are the resources found over their limit at the last moment, so a
	// violation is reported when it starts, not at every later event.
	over map[corev1.ResourceName]bool
}

func parseCapacityQuota(q *autoscalingv1beta1.CapacityQuota) *capacityQuota {
	out := &capacityQuota{name: q.Name, uid: q.UID, changed: lastSpecChange(&q.ObjectMeta),
		limits: map[corev1.ResourceName]resource.Quantity{}, over: map[corev1.ResourceName]bool{}}
	for name, limit := range q.Spec.Limits.Resources {
		whole := limit.DeepCopy()
		if exact := whole.RoundUp(0); !exact || limit.Sign() < 0 {
			return out
		}
		out.limits[corev1.ResourceName(name)] = limit
	}
	selector := labels.Everything()
	if s := q.Spec.Selector; s != nil {
		parsed, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return out
		}
		for _, key := range instanceTypeKeys {
			if _, used := s.MatchLabels[key]; used {
				return out
			}
			if slices.ContainsFunc(s.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return r.Key == key }) {
				return out
			}
		}
		selector = parsed
	}
	out.selector = selector
	return out
}

// lastSpecChange is the latest write of the object other than its status: the
// newest managedFields entry of the main resource, or its creation.
func lastSpecChange(meta *metav1.ObjectMeta) metav1.Time {
	last := meta.CreationTimestamp
	for _, f := range meta.ManagedFields {
		if f.Subresource == "" && f.Time != nil && last.Before(f.Time) {
			last = *f.Time
		}
	}
	return last
}

// counts reports whether a node counts toward quotas at all.
func counts(node *corev1.Node) bool {
	return node.Labels["type"] != "virtual-kubelet"
}

// nodeAmount is what one node counts on one resource: its capacity rounded up
// to a whole unit (whole cores for cpu, bytes for memory), 1 for "nodes", or
// for a device class its devices (deviceAmountLocked).
func (o *Oracle) nodeAmountLocked(node *corev1.Node, name corev1.ResourceName) resource.Quantity {
	if name == corev1.ResourceName(autoscalingv1beta1.ResourceNodes) {
		return *resource.NewQuantity(1, resource.DecimalSI)
	}
	if class, ok := deviceClassOf(name); ok {
		return o.deviceAmountLocked(node, class)
	}
	capacity, ok := node.Status.Capacity[name]
	if !ok {
		return resource.Quantity{}
	}
	whole := capacity.DeepCopy()
	whole.RoundUp(0)
	return whole
}

// checkQuotasLocked judges every valid quota against the nodes registered
// since its last change.
func (o *Oracle) checkQuotasLocked(cause string) {
	for _, name := range sortedKeys(o.quotas) {
		q := o.quotas[name]
		if q.selector == nil {
			continue
		}
		used := map[corev1.ResourceName]*resource.Quantity{}
		for r := range q.limits {
			used[r] = &resource.Quantity{}
		}
		selected := 0
		for _, node := range o.nodes {
			if !counts(node) || !q.changed.Before(&node.CreationTimestamp) || !q.selector.Matches(labels.Set(node.Labels)) {
				continue
			}
			selected++
			for r, sum := range used {
				sum.Add(o.nodeAmountLocked(node, r))
			}
		}
		for _, r := range sortedKeys(q.limits) {
			limit := q.limits[r]
			over := used[r].Cmp(limit) > 0
			if over && !q.over[r] {
				o.violateLocked(fmt.Sprintf("CapacityQuota %s: %d node(s) registered since its last change (%s) have %s %s, over its limit %s; on %s",
					q.name, selected, q.changed.UTC().Format("15:04:05"), r, used[r].String(), limit.String(), cause))
			}
			q.over[r] = over
		}
	}
}
