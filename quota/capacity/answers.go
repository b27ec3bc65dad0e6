package capacity

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// group is what the set knows of one node group.
type group struct {
	upcoming *member // nil when none
	answer   answer
}

func (s *Set) newGroup(name string) *group {
	g := &group{answer: answer{perNode: s.index.Zero(), slot: -1}}
	s.groups[name] = g
	return g
}

// answer is a node group's last check, kept until a change to a limit it
// reads could alter it. With k the answer for wanted, it depends only on each
// limit's bound (headroom / per-node amount) clipped at reach = min(k+1,
// wanted): k is the smallest clipped bound, and when k < wanted the binding
// limits are those with clipped bound k. A limit's clipped bound cannot change
// while its headroom stays at or above reach per-node amounts, so only changes
// below that concern the answer.
type answer struct {
	template *corev1.Node // the template last asked about
	set      *labelSet    // its label set; nil until first asked
	perNode  resources.Vector
	slot     int // position in set.answers, -1 when in none
	valid    bool
	wanted   int64
	k        int64
	reach    int64
	exceeded []Exceeded
}

// AllowedDeltaFor is AllowedDelta for nodeGroup's template, remembered per
// node group: the answer is computed again only when a change since the last
// call (nodes, upcoming nodes or limits of a quota the template matches, a
// template with other labels or capacity, or a larger wanted where nothing
// bound) could alter it. A loop asking about every group then costs about
// what changed since the last loop, not groups times matching quotas. The
// answer is always AllowedDelta's; the returned slice is shared by later
// calls and must not be modified.
func (s *Set) AllowedDeltaFor(nodeGroup string, template *corev1.Node, wanted int) (int, []Exceeded) {
	if wanted <= 0 {
		return 0, nil
	}
	g := s.groups[nodeGroup]
	if g == nil {
		g = s.newGroup(nodeGroup)
	}
	a := &g.answer
	if a.set == nil || a.template != template {
		s.resolve(g, template)
	}
	want := int64(wanted)
	if !a.valid || (want > a.wanted && a.k == a.wanted) {
		s.remember(a, want)
	}
	if want <= a.k {
		return wanted, nil
	}
	return int(a.k), a.exceeded
}

// resolve points g's answer at template, keeping the answer when the
// template's label set and capacity are those it was computed for.
func (s *Set) resolve(g *group, template *corev1.Node) {
	a := &g.answer
	var set *labelSet
	var capacity resources.Vector
	if m := g.upcoming; m != nil && template != nil && m.object == template {
		set, capacity = m.set, m.capacity // SetUpcoming resolved it this loop
	} else {
		var nodeLabels map[string]string
		if template != nil {
			nodeLabels = template.Labels
		}
		set, capacity = s.labelSetOf(nodeLabels), s.perNode
		s.loadCapacity(capacity, template)
	}
	a.template = template
	if set == a.set && capacity.Equal(a.perNode) {
		return
	}
	s.detach(a)
	a.set, a.valid = set, false
	copy(a.perNode, capacity)
	a.slot = len(set.answers)
	set.answers = append(set.answers, a)
}

func (s *Set) detach(a *answer) {
	if a.slot < 0 {
		return
	}
	answers := a.set.answers
	last := answers[len(answers)-1]
	answers[a.slot], last.slot = last, a.slot
	a.set.answers = answers[:len(answers)-1]
	a.slot = -1
}

// remember computes a's answer for want and raises the watch of every limit it
// reads to the headroom below which the answer could change.
func (s *Set) remember(a *answer, want int64) {
	a.k, a.exceeded = s.allowed(a.set, a.perNode, want)
	a.wanted, a.reach, a.valid = want, min(a.k+1, want), true
	for _, li := range a.set.limits {
		l := &s.limits[li]
		if per := a.perNode[l.dim]; per > 0 {
			l.watch = max(l.watch, resources.SaturatingMul(per, a.reach))
		}
	}
}

// forget invalidates the answers that limit li's headroom falling to or
// rising from low could alter, and lowers the limit's watch to what the
// remaining answers need.
func (s *Set) forget(li int, low int64) {
	l := &s.limits[li]
	watch := int64(0)
	for _, set := range s.quotas[l.quota].matched {
		for _, a := range set.answers {
			per := a.perNode[l.dim]
			if !a.valid || per == 0 {
				continue
			}
			if threshold := resources.SaturatingMul(per, a.reach); low < threshold {
				a.valid = false
			} else {
				watch = max(watch, threshold)
			}
		}
	}
	l.watch = watch
}
