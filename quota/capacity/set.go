package capacity

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// ClusterWideName is the name callers give the synthetic quota that carries
// the autoscaler's cluster-wide limits (an empty selector matches every node),
// so those limits are enforced and explained like any other quota.
const ClusterWideName = "cluster-wide"

// ClusterWide wraps cluster-wide limits as a quota named ClusterWideName to
// pass to Build alongside the CapacityQuota objects.
func ClusterWide(limits autoscalingv1beta1.ResourceList) *autoscalingv1beta1.CapacityQuota {
	q := &autoscalingv1beta1.CapacityQuota{}
	q.Name = ClusterWideName
	q.Spec.Limits.Resources = limits
	return q
}

// Options tune validation.
type Options struct {
	// ForbiddenSelectorKeys are label keys selectors may not use. Nil means
	// DefaultForbiddenSelectorKeys; an empty non-nil slice forbids nothing.
	ForbiddenSelectorKeys []string
}

// Set is the enforced view of a list of CapacityQuotas plus the nodes and
// upcoming node groups counted against them.
type Set struct {
	index         *resources.Index
	resourceNames []corev1.ResourceName // index's names, kept to iterate without copying
	nodesAt       int                   // position of the "nodes" resource, -1 when nothing limits it
	quotas        []quota               // sorted by name
	limits        []limit               // every valid quota's limited resources, flat
	keys          labelKeys
	projection    []string // scratch for labelSetOf
	sets          labelSetCache
	nodes         map[string]*member // registered nodes by name
	groups        map[string]*group  // node groups by name: upcoming nodes and last check
	perNode       resources.Vector   // scratch for a template's capacity
}

type quota struct {
	source   *autoscalingv1beta1.CapacityQuota
	name     string
	problems []string
	selector labels.Selector
	limits   []int       // positions in Set.limits, in resource name order
	matched  []*labelSet // the label sets the selector matches, to find the checks a change concerns
}

func (q *quota) valid() bool { return len(q.problems) == 0 }

// limit is one quota's ceiling on one resource with the usage counted
// against it. Keeping these flat lets a check walk one slice per label set.
type limit struct {
	quota int // position in Set.quotas
	dim   int // position in Set.index
	max   int64
	// registered counts nodes that exist, upcoming the node groups' nodes
	// still being provisioned or planned in this loop. Enforcement uses both;
	// status.used shows registered only.
	registered int64
	upcoming   int64
	// watch is at least the largest headroom at which a remembered check
	// could read a different bound from this limit (see answer.reach): a
	// change that keeps the headroom at or above it concerns no check.
	watch int64
}

// headroom is what is left under the limit, never negative.
func (l *limit) headroom() int64 {
	return resources.FlooredSub(l.max, resources.SaturatingAdd(l.registered, l.upcoming))
}

// Build validates quotas and returns a set enforcing the valid ones; invalid
// ones are kept only to report their problems. Nil entries are skipped. When
// two quotas share a name, the first one in the list wins and the others are
// invalid.
func Build(quotas []*autoscalingv1beta1.CapacityQuota, options Options) *Set {
	return newSet(parseQuotas(quotas, options))
}

// parseQuotas validates quotas and sorts them by name.
func parseQuotas(quotas []*autoscalingv1beta1.CapacityQuota, options Options) []quota {
	forbidden := options.ForbiddenSelectorKeys
	if forbidden == nil {
		forbidden = DefaultForbiddenSelectorKeys()
	}
	var parsed []quota
	seen := map[string]bool{}
	for _, source := range quotas {
		if source == nil {
			continue
		}
		q := quota{source: source, name: source.Name}
		q.selector, q.problems = validate(source, forbidden)
		if seen[q.name] {
			q.problems = append(q.problems, "another CapacityQuota with this name comes first")
		}
		seen[q.name] = true
		parsed = append(parsed, q)
	}
	slices.SortStableFunc(parsed, func(a, b quota) int { return strings.Compare(a.name, b.name) })
	return parsed
}

func newSet(quotas []quota) *Set {
	s := &Set{quotas: quotas, nodes: map[string]*member{}, groups: map[string]*group{}, sets: labelSetCache{}}
	var limited []corev1.ResourceName
	for i := range s.quotas {
		if q := &s.quotas[i]; q.valid() {
			limited = append(limited, limitNames(q.source)...)
		}
	}
	s.index = resources.NewIndex(limited...)
	s.resourceNames = s.index.Names()
	s.nodesAt = -1
	if pos, ok := s.index.Position(corev1.ResourceName(autoscalingv1beta1.ResourceNodes)); ok {
		s.nodesAt = pos
	}
	s.perNode = s.index.Zero()
	var selectors []labels.Selector
	for i := range s.quotas {
		q := &s.quotas[i]
		if !q.valid() {
			continue
		}
		for _, name := range limitNames(q.source) {
			dim, _ := s.index.Position(name)
			q.limits = append(q.limits, len(s.limits))
			s.limits = append(s.limits, limit{quota: i, dim: dim, max: limitUnits(q.source, name)})
		}
		selectors = append(selectors, q.selector)
	}
	s.keys = newLabelKeys(selectors)
	s.projection = make([]string, len(s.keys.names))
	return s
}

func limitUnits(q *autoscalingv1beta1.CapacityQuota, name corev1.ResourceName) int64 {
	return resources.Units(name, q.Spec.Limits.Resources[autoscalingv1beta1.ResourceName(name)])
}

// Rebuild returns a set enforcing quotas that counts every node and upcoming
// group of s, so a changed CapacityQuota does not need a re-list. When the
// quotas differ from s's only in their limits' amounts (same names, validity,
// selectors and limited resources; a status write changes none of these), s
// is updated in place and returned, and only the checks a changed limit
// concerns are computed again. Otherwise s is left as it was.
func (s *Set) Rebuild(quotas []*autoscalingv1beta1.CapacityQuota, options Options) *Set {
	parsed := parseQuotas(quotas, options)
	if s.sameShape(parsed) {
		s.updateLimits(parsed)
		return s
	}
	next := newSet(parsed)
	for _, name := range sortedKeys(s.nodes) {
		next.AddNode(s.nodes[name].object)
	}
	for _, name := range sortedKeys(s.groups) {
		if m := s.groups[name].upcoming; m != nil {
			next.SetUpcoming(name, int(m.count), m.object)
		}
	}
	return next
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
