package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/duration"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/capacity"
	"github.com/quotascale/quotascale/quota/resources"
)

// Capacity reports every CapacityQuota with what the autoscaler counts against
// it: registered nodes, and the upcoming nodes of the groups its selector
// matches (counted as the autoscaler counts them, shaped like the group's
// template).
func Capacity(s Snapshot) CapacityReport {
	out := CapacityReport{Kind: "CapacityReport", APIVersion: APIVersion, Quotas: []CapacityQuotaView{}, Notes: slices.Clone(s.Notes)}
	groups := nodeGroups(s.Autoscaler, s.Nodes)
	set, unknown := quotaSet(s.Quotas, s.Nodes, groups)
	out.Notes = append(out.Notes, upcomingNotes(s, unknown)...)
	for _, q := range sortedQuotas(s.Quotas) {
		out.Quotas = append(out.Quotas, quotaView(q, set, groups, s.NodesListed, s.Autoscaler != nil))
		out.Notes = append(out.Notes, deviceNotes(q)...)
	}
	return out
}

// deviceNotes say where a quota's device counts come from, and what its
// device-classes condition reports (a limit matching no device because its
// class does not exist, or a class whose selectors fail).
func deviceNotes(q *autoscalingv1beta1.CapacityQuota) []string {
	var notes []string
	for _, name := range sortedNames(capacity.ToCoreList(q.Spec.Limits.Resources)) {
		if _, ok := resources.DeviceClassOf(name); ok {
			notes = append(notes, fmt.Sprintf("CapacityQuota %s: device counts are status.used, as the autoscaler last wrote it (kubectl-quota does not evaluate DeviceClass selectors); upcoming devices are unknown", q.Name))
			break
		}
	}
	if c := meta.FindStatusCondition(q.Status.Conditions, autoscalingv1beta1.DeviceClassesCondition); c != nil && c.Status == metav1.ConditionFalse {
		notes = append(notes, fmt.Sprintf("CapacityQuota %s: %s", q.Name, c.Message))
	}
	return notes
}

func sortedQuotas(quotas []*autoscalingv1beta1.CapacityQuota) []*autoscalingv1beta1.CapacityQuota {
	out := slices.DeleteFunc(slices.Clone(quotas), func(q *autoscalingv1beta1.CapacityQuota) bool { return q == nil })
	slices.SortStableFunc(out, func(a, b *autoscalingv1beta1.CapacityQuota) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func upcomingNotes(s Snapshot, unknown []string) []string {
	notes := staleStatusNotes(s)
	if s.Autoscaler == nil {
		notes = append(notes, "upcoming nodes are unknown without the autoscaler's status")
	}
	if len(unknown) > 0 {
		notes = append(notes, fmt.Sprintf("node group(s) %s have upcoming nodes but no registered node to read labels and capacity from: their upcoming nodes are not counted", strings.Join(unknown, ", ")))
	}
	if !s.NodesListed {
		notes = append(notes, "nodes could not be listed: used is status.used, as the autoscaler last wrote it")
	}
	return notes
}

// quotaView is one quota's figures. Used comes from the registered nodes, as
// the autoscaler counts them, unless nodes could not be listed.
func quotaView(q *autoscalingv1beta1.CapacityQuota, set *capacity.Set, groups []*nodeGroup, nodesListed, upcomingKnown bool) CapacityQuotaView {
	st, _ := set.Quota(q.Name)
	view := CapacityQuotaView{Name: q.Name, Selector: selectorString(q.Spec.Selector), Valid: st.Valid, Message: st.Message, UsedFrom: FromNodes}
	for _, g := range groups {
		if g.template != nil && slices.Contains(set.MatchingQuotas(g.template), q.Name) {
			view.NodeGroups = append(view.NodeGroups, g.status.Name)
		}
	}
	used, upcoming := st.Used, st.Upcoming
	if !nodesListed || !st.Valid {
		view.UsedFrom, used, upcoming = FromStatus, statusUsed(q), nil
	}
	limits := capacity.ToCoreList(q.Spec.Limits.Resources)
	for _, name := range sortedNames(limits) {
		used, upcoming := used, upcoming
		if _, isDevice := resources.DeviceClassOf(name); isDevice {
			// Nodes' capacity holds no devices: the autoscaler counts them
			// from ResourceSlices with CEL, which kubectl-quota does not link.
			used, upcoming = statusUsed(q), nil
		}
		r := QuotaResource{Resource: string(name), Limit: quantityOr(limits, name, "0"), Used: quantityOr(used, name, "0")}
		if upcoming != nil && upcomingKnown {
			r.Upcoming = quantityOr(upcoming, name, "0")
		}
		r.Headroom = headroom(name, limits, used, upcoming)
		view.Resources = append(view.Resources, r)
	}
	return view
}

func statusUsed(q *autoscalingv1beta1.CapacityQuota) corev1.ResourceList {
	if q.Status.Used == nil {
		return corev1.ResourceList{}
	}
	return capacity.ToCoreList(q.Status.Used.Resources)
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return "<all nodes>"
	}
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "<invalid>"
	}
	if selector.Empty() {
		return "<all nodes>"
	}
	return selector.String()
}

// quotasBySelector is the fallback when no group's labels are known: the valid
// quotas that certainly count any node the pod can land on, because the pod's
// nodeSelector alone satisfies the quota's selector and every requirement of
// that selector is positive (a NotIn or DoesNotExist could be broken by labels
// the pod does not select on). Figures are status.used, upcoming unknown.
func quotasBySelector(pod *corev1.Pod, quotas []*autoscalingv1beta1.CapacityQuota) []CapacityQuotaView {
	set := capacity.Build(quotas, capacity.Options{})
	var out []CapacityQuotaView
	for _, q := range sortedQuotas(quotas) {
		st, _ := set.Quota(q.Name)
		if !st.Valid || !certainlySelects(q.Spec.Selector, pod.Spec.NodeSelector) {
			continue
		}
		view := quotaView(q, set, nil, false, false)
		out = append(out, view)
	}
	return out
}

func certainlySelects(s *metav1.LabelSelector, nodeSelector map[string]string) bool {
	if s == nil {
		return true
	}
	selector, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return false
	}
	requirements, _ := selector.Requirements()
	for _, r := range requirements {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In, selection.Exists:
		default:
			return false
		}
	}
	return selector.Matches(labels.Set(nodeSelector))
}

// staleAfter is how old an autoscaler status may be before kubectl-quota warns:
// the autoscaler rewrites it every loop, every 10s by default.
const staleAfter = 5 * time.Minute

func staleStatusNotes(s Snapshot) []string {
	if s.Autoscaler == nil || s.Autoscaler.Time.IsZero() || s.Now.Sub(s.Autoscaler.Time) <= staleAfter {
		return nil
	}
	return []string{fmt.Sprintf("the autoscaler status was written %s ago: is the autoscaler running? Its node groups may be out of date",
		duration.HumanDuration(s.Now.Sub(s.Autoscaler.Time)))}
}
