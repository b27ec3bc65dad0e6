package capacity

import (
	"slices"

	"github.com/quotascale/quotascale/quota/resources"
)

// sameShape tells whether parsed quotas differ from s's only in their limits'
// amounts, so that s's index, label sets and remembered checks stay meaningful
// with the new amounts.
func (s *Set) sameShape(parsed []quota) bool {
	if len(parsed) != len(s.quotas) {
		return false
	}
	for i := range parsed {
		p, q := &parsed[i], &s.quotas[i]
		if p.name != q.name || !slices.Equal(p.problems, q.problems) {
			return false
		}
		// Selector strings are canonical (requirements and values sorted), so
		// equal strings select the same nodes.
		if q.valid() && (p.selector.String() != q.selector.String() || !slices.Equal(limitNames(p.source), limitNames(q.source))) {
			return false
		}
	}
	return true
}

// updateLimits takes parsed's objects and limit amounts; parsed has s's shape.
func (s *Set) updateLimits(parsed []quota) {
	for i := range parsed {
		q := &s.quotas[i]
		q.source = parsed[i].source
		for _, li := range q.limits {
			l := &s.limits[li]
			before := l.headroom()
			l.max = limitUnits(q.source, s.index.Name(l.dim))
			s.headroomChanged(li, before)
		}
	}
}

// shift takes sub from and adds add to what limit li counts of registered or
// upcoming nodes.
func (s *Set) shift(li int, upcoming bool, sub, add int64) {
	l := &s.limits[li]
	before := l.headroom()
	target := &l.registered
	if upcoming {
		target = &l.upcoming
	}
	*target = resources.SaturatingAdd(resources.FlooredSub(*target, sub), add)
	s.headroomChanged(li, before)
}

// headroomChanged forgets the remembered checks that limit li's headroom,
// before the change, could have altered. Most changes leave the headroom above
// every check's reach and cost one comparison.
func (s *Set) headroomChanged(li int, before int64) {
	l := &s.limits[li]
	if after := l.headroom(); after != before && min(before, after) < l.watch {
		s.forget(li, min(before, after))
	}
}
