package capacity

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// QuotaStatus is what the status controller writes for one quota.
type QuotaStatus struct {
	Name string
	// Valid quotas are enforced; Message is then autoscalingv1beta1.ValidMessage.
	// Otherwise Message lists every problem, sorted, joined by "; ".
	Valid   bool
	Message string
	// Used is the registered nodes' summed capacity on each limited resource,
	// for status.used. Upcoming is what nodes still being provisioned or
	// planned add on top; enforcement counts both. Both are nil when invalid.
	Used     corev1.ResourceList
	Upcoming corev1.ResourceList
}

// Status reports every quota given to Build, sorted by name.
func (s *Set) Status() []QuotaStatus {
	out := make([]QuotaStatus, 0, len(s.quotas))
	for i := range s.quotas {
		out = append(out, s.status(&s.quotas[i]))
	}
	return out
}

// Quota reports one quota by name.
func (s *Set) Quota(name string) (QuotaStatus, bool) {
	i, found := slices.BinarySearchFunc(s.quotas, name, func(q quota, name string) int { return strings.Compare(q.name, name) })
	if !found {
		return QuotaStatus{}, false
	}
	return s.status(&s.quotas[i]), true
}

func (s *Set) status(q *quota) QuotaStatus {
	if !q.valid() {
		return QuotaStatus{Name: q.name, Message: strings.Join(q.problems, "; ")}
	}
	status := QuotaStatus{
		Name:     q.name,
		Valid:    true,
		Message:  autoscalingv1beta1.ValidMessage,
		Used:     corev1.ResourceList{},
		Upcoming: corev1.ResourceList{},
	}
	for _, li := range q.limits {
		l := &s.limits[li]
		status.Used[s.index.Name(l.dim)] = s.index.Quantity(l.dim, l.registered)
		status.Upcoming[s.index.Name(l.dim)] = s.index.Quantity(l.dim, l.upcoming)
	}
	return status
}

// MatchingQuotas names the valid quotas whose selector matches node, sorted,
// e.g. for explaining a node group's limits.
func (s *Set) MatchingQuotas(node *corev1.Node) []string {
	var names []string
	if node == nil {
		node = &corev1.Node{}
	}
	for i := range s.quotas {
		if q := &s.quotas[i]; q.valid() && q.selector.Matches(labels.Set(node.Labels)) {
			names = append(names, q.name)
		}
	}
	return names
}

// ToCoreList converts a CapacityQuota resource list for use with the
// resources package.
func ToCoreList(list autoscalingv1beta1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(list))
	for name, q := range list {
		out[corev1.ResourceName(name)] = q
	}
	return out
}

// FromCoreList converts a core resource list, e.g. QuotaStatus.Used, into the
// CapacityQuota status type.
func FromCoreList(list corev1.ResourceList) autoscalingv1beta1.ResourceList {
	out := make(autoscalingv1beta1.ResourceList, len(list))
	for name, q := range list {
		out[autoscalingv1beta1.ResourceName(name)] = q
	}
	return out
}
