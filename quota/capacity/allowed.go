package capacity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// Exceeded is a quota that stops a scale-up short of what was wanted.
type Exceeded struct {
	Quota string
	// Resources are the limits that bind, sorted.
	Resources []corev1.ResourceName
}

// Reason is the refusal in the cluster autoscaler's words, e.g.
//
//	exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu
func (e Exceeded) Reason() string {
	names := make([]string, 0, len(e.Resources))
	for _, name := range e.Resources {
		names = append(names, string(name))
	}
	return fmt.Sprintf("exceeded quota: %q, resources: %s", "CapacityQuota/"+e.Quota, strings.Join(names, ", "))
}

// AllowedDelta is the largest k <= wanted such that adding k nodes like
// template keeps every valid quota matching the template within its limits,
// counting registered and upcoming nodes. For each such quota and limited
// resource, k is at most headroom / per-node amount (headroom floored at
// zero; a resource the template does not have does not constrain). When
// k < wanted, exceeded lists the binding quotas in name order: those that stop
// the (k+1)-th node, each with the resources whose own bound is exactly k. A
// quota that would only stop a later node is not named: the reason must point at
// what to raise first. The check does not allocate when nothing binds.
func (s *Set) AllowedDelta(template *corev1.Node, wanted int) (int, []Exceeded) {
	if wanted <= 0 {
		return 0, nil
	}
	var nodeLabels map[string]string
	if template != nil {
		nodeLabels = template.Labels
	}
	set := s.labelSetOf(nodeLabels)
	s.loadCapacity(s.perNode, template)
	k, exceeded := s.allowed(set, s.perNode, int64(wanted))
	return int(k), exceeded
}

// allowed is AllowedDelta for a template of label set and capacity perNode.
func (s *Set) allowed(set *labelSet, perNode resources.Vector, want int64) (int64, []Exceeded) {
	k := want
	for _, li := range set.limits {
		l := &s.limits[li]
		per := perNode[l.dim]
		if per == 0 {
			continue
		}
		// headroom/per < k exactly when headroom < per*k; the product is
		// cheaper than the division on the common path where nothing binds.
		if headroom := l.headroom(); headroom < resources.SaturatingMul(per, k) {
			k = headroom / per
		}
	}
	if k == want {
		return want, nil
	}
	var exceeded []Exceeded
	next := k + 1
	for _, li := range set.limits { // quotas in name order, resources sorted
		l := &s.limits[li]
		per := perNode[l.dim]
		if per == 0 || l.headroom() >= resources.SaturatingMul(per, next) {
			continue
		}
		name := s.quotas[l.quota].name
		if n := len(exceeded); n == 0 || exceeded[n-1].Quota != name {
			exceeded = append(exceeded, Exceeded{Quota: name})
		}
		last := &exceeded[len(exceeded)-1]
		last.Resources = append(last.Resources, s.index.Name(l.dim))
	}
	return k, exceeded
}
