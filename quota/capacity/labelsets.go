package capacity

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// absent marks a key a node does not carry. Label values cannot contain a
// NUL byte, so it never collides with a real value, the empty one included.
const absent = "\x00"

// labelKeys are the label keys any enforced selector looks at, sorted.
// Projecting a node's labels onto them drops per-node labels such as the
// hostname, so all nodes of a node group (and its template) share one
// projected label set.
type labelKeys struct {
	names    []string
	position map[string]int
}

func newLabelKeys(selectors []labels.Selector) labelKeys {
	var names []string
	for _, selector := range selectors {
		requirements, _ := selector.Requirements()
		for _, r := range requirements {
			names = append(names, r.Key())
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	keys := labelKeys{names: names, position: make(map[string]int, len(names))}
	for i, name := range names {
		keys.position[name] = i
	}
	return keys
}

// labelSet is one distinct projection and the limits of the valid quotas
// that match it, computed once when the projection is first seen.
type labelSet struct {
	values  []string  // per labelKeys.names entry; absent when missing
	limits  []int     // positions in Set.limits: quotas in name order, resources sorted
	answers []*answer // the node groups' remembered checks for this label set
}

// labelSetCache buckets label sets by a hash of their projected values;
// a bucket resolves collisions by comparing the values.
type labelSetCache map[uint64][]*labelSet

// labelSetOf finds or creates the label set of nodeLabels. Finding does not
// allocate: the projection goes into a scratch slice.
func (s *Set) labelSetOf(nodeLabels map[string]string) *labelSet {
	values := s.projection
	if len(s.keys.names) <= len(nodeLabels) {
		for i, key := range s.keys.names {
			value, ok := nodeLabels[key]
			if !ok {
				value = absent
			}
			values[i] = value
		}
	} else {
		for i := range values {
			values[i] = absent
		}
		for key, value := range nodeLabels {
			if i, ok := s.keys.position[key]; ok {
				values[i] = value
			}
		}
	}
	hash := hashValues(values)
	for _, candidate := range s.sets[hash] {
		if slices.Equal(candidate.values, values) {
			return candidate
		}
	}
	created := &labelSet{values: slices.Clone(values)}
	projected := labels.Set{}
	for i, value := range values {
		if value != absent {
			projected[s.keys.names[i]] = value
		}
	}
	for i := range s.quotas {
		if q := &s.quotas[i]; q.valid() && q.selector.Matches(projected) {
			created.limits = append(created.limits, q.limits...)
			q.matched = append(q.matched, created)
		}
	}
	s.sets[hash] = append(s.sets[hash], created)
	return created
}

// hashValues is FNV-1a over the values, each followed by a separator byte
// that no label value contains.
func hashValues(values []string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, value := range values {
		for i := 0; i < len(value); i++ {
			h = (h ^ uint64(value[i])) * prime
		}
		h = (h ^ 0xff) * prime
	}
	return h
}
