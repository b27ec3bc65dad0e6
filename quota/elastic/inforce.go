package elastic

import (
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// InForce is the tree the scheduler enforces among trees: the oldest in
// kube-system, ties broken by name. Nil when there is none. The scheduler, the
// autoscaler and kubectl-quota all choose with it, so they never disagree on
// which tree governs.
func InForce(trees []*schedulingv1beta1.ElasticQuotaTree) *schedulingv1beta1.ElasticQuotaTree {
	var chosen *schedulingv1beta1.ElasticQuotaTree
	for _, t := range trees {
		if t == nil || t.Namespace != schedulingv1beta1.EnforcedNamespace {
			continue
		}
		if chosen == nil || OlderFirst(t, chosen) {
			chosen = t
		}
	}
	return chosen
}

// OlderFirst orders trees by creation time, then namespace and name.
func OlderFirst(a, b *schedulingv1beta1.ElasticQuotaTree) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
