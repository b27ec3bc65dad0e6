package capacity

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// maxLimitedResources and maxResourceNameLength mirror the CRD schema, so a
// quota that bypassed schema validation is judged the same way.
const (
	maxLimitedResources   = 20
	maxResourceNameLength = 63
)

// DefaultForbiddenSelectorKeys are the label keys a selector may not use:
// instance types are chosen by the autoscaler per scale-up, so a quota keyed on
// them would constrain a choice rather than a budget.
func DefaultForbiddenSelectorKeys() []string {
	return []string{"beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"}
}

// validate returns the selector to enforce and every problem, sorted. A
// missing selector selects every node, like an empty one.
func validate(q *autoscalingv1beta1.CapacityQuota, forbidden []string) (labels.Selector, []string) {
	var problems []string
	selector := labels.Everything()
	if q.Spec.Selector != nil {
		parsed, err := metav1.LabelSelectorAsSelector(q.Spec.Selector)
		if err != nil {
			problems = append(problems, fmt.Sprintf("selector is invalid: %v", err))
		} else {
			selector = parsed
		}
		for _, key := range forbiddenKeysIn(q.Spec.Selector, forbidden) {
			problems = append(problems, fmt.Sprintf("selector must not use label key %q", key))
		}
	}
	limits := q.Spec.Limits.Resources
	if len(limits) > maxLimitedResources {
		problems = append(problems, fmt.Sprintf("limits name %d resources, at most %d are allowed", len(limits), maxLimitedResources))
	}
	for name, limit := range limits {
		problems = append(problems, nameProblems(corev1.ResourceName(name))...)
		// Integral in the API server's sense (CEL quantity isInteger): "2k"
		// and "32Gi" are, "1000m" and "1.5Gi" are not, whatever they round to.
		if _, integral := limit.AsInt64(); !integral || limit.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("limit %s must be a non-negative integer, got %s", name, exactDecimal(limit)))
		}
	}
	slices.Sort(problems)
	return selector, slices.Compact(problems)
}

// nameProblems judges a limit's resource name as the CRD schema does: at most
// 63 characters, or a device-class name (resources.DeviceClassOf) whose prefix
// "<class>.deviceclass.resource.k8s.io" is a DNS subdomain (at most 253
// characters), as core ResourceQuota takes it: classes are named after their
// driver's domain and often do not fit in 63. A name that reads like a
// device-class name but is not one (a class name with capitals or
// underscores) is told so, since it could never match a class.
func nameProblems(name corev1.ResourceName) []string {
	if _, isDevice := resources.DeviceClassOf(name); isDevice {
		prefix, _ := strings.CutSuffix(string(name), "/devices")
		if errs := validation.IsDNS1123Subdomain(prefix); len(errs) > 0 {
			return []string{fmt.Sprintf("limit resource name %q: %s", name, strings.Join(errs, "; "))}
		}
		return nil
	}
	if strings.HasSuffix(string(name), corev1.ResourceClaimsPerClass) {
		class := strings.TrimSuffix(string(name), corev1.ResourceClaimsPerClass)
		return []string{fmt.Sprintf("limit resource name %q names device class %q, which is not a valid DeviceClass name (a lowercase DNS subdomain)", name, class)}
	}
	if len(name) == 0 || len(name) > maxResourceNameLength {
		return []string{fmt.Sprintf("limit resource name %q must be 1 to %d characters", name, maxResourceNameLength)}
	}
	return nil
}

// exactDecimal shows a quantity as the plain decimal it stands for, so
// "1000m" reads "1.000" rather than its canonical "1", which would make the
// complaint look wrong. Values with an extreme exponent keep their canonical
// form: spelling out 1e99999999 would take a hundred million digits.
func exactDecimal(q resource.Quantity) string {
	exact := q.DeepCopy()
	dec := exact.AsDec()
	if scale := dec.Scale(); scale < -18 || scale > 18 {
		return q.String()
	}
	text := dec.String()
	// Parsing keeps nine decimals for binary suffixes; three are enough to
	// show the value is not whole.
	if point := strings.IndexByte(text, '.'); point >= 0 {
		for len(text)-point-1 > 3 && strings.HasSuffix(text, "0") {
			text = text[:len(text)-1]
		}
	}
	return text
}

func forbiddenKeysIn(selector *metav1.LabelSelector, forbidden []string) []string {
	var found []string
	for _, key := range forbidden {
		_, inLabels := selector.MatchLabels[key]
		inExpressions := slices.ContainsFunc(selector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool { return r.Key == key })
		if inLabels || inExpressions {
			found = append(found, key)
		}
	}
	slices.Sort(found)
	return slices.Compact(found)
}

// limitNames are the resources a quota limits, as core resource names.
func limitNames(q *autoscalingv1beta1.CapacityQuota) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(q.Spec.Limits.Resources))
	for name := range q.Spec.Limits.Resources {
		names = append(names, corev1.ResourceName(name))
	}
	slices.Sort(names)
	return names
}
