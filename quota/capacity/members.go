package capacity

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// member is what one registered node, or one node group's upcoming nodes,
// adds to the quotas its labels match: count times capacity.
type member struct {
	object   *corev1.Node // kept to re-add on Rebuild; must not be mutated
	set      *labelSet
	capacity resources.Vector
	count    int64
	upcoming bool
}

// AddNode counts a registered node, or re-counts it if a node of that name is
// already counted (labels or capacity may have changed, moving it between
// quotas). The set keeps the pointer for Rebuild: pass informer objects, which
// are never mutated.
func (s *Set) AddNode(node *corev1.Node) {
	if node == nil {
		return
	}
	s.nodes[node.Name] = s.replace(s.nodes[node.Name], node, 1, false)
}

// UpdateNode is AddNode; it exists so informer handlers read naturally.
func (s *Set) UpdateNode(node *corev1.Node) { s.AddNode(node) }

// RemoveNode stops counting a node and reports whether it was counted.
func (s *Set) RemoveNode(name string) bool {
	old, ok := s.nodes[name]
	if !ok {
		return false
	}
	s.account(old, -1)
	delete(s.nodes, name)
	return true
}

// SetUpcoming replaces what nodeGroup's not-yet-registered nodes count:
// count copies of template (kept like AddNode's nodes: do not mutate it). Callers pass nodes still provisioning plus nodes
// planned earlier in the same loop, so two scale-ups in one loop cannot both
// spend the same headroom. A count of zero or less, or a nil template, clears
// the group.
func (s *Set) SetUpcoming(nodeGroup string, count int, template *corev1.Node) {
	old, ok := s.groups[nodeGroup]
	if count <= 0 || template == nil {
		if ok {
			s.account(old, -1)
			delete(s.groups, nodeGroup)
		}
		return
	}
	s.groups[nodeGroup] = s.replace(old, template, int64(count), true)
}

// replace swaps m's contribution (m may be nil) for count copies of node,
// reusing m's memory so a loop refreshing its groups does not allocate, and
// skipping the label and capacity work when node is the object m already
// holds (objects passed in are never mutated).
func (s *Set) replace(m *member, node *corev1.Node, count int64, upcoming bool) *member {
	if m == nil {
		m = &member{capacity: s.index.Zero()}
	} else {
		s.account(m, -1)
	}
	if m.object != node { // same object, same labels and capacity: see AddNode
		m.object, m.set = node, s.labelSetOf(node.Labels)
		s.loadCapacity(m.capacity, node)
	}
	m.count, m.upcoming = count, upcoming
	s.account(m, 1)
	return m
}

// account adds (sign 1) or removes (sign -1) m's contribution.
func (s *Set) account(m *member, sign int) {
	for _, li := range m.set.limits {
		l := &s.limits[li]
		target := &l.registered
		if m.upcoming {
			target = &l.upcoming
		}
		amount := resources.SaturatingMul(m.capacity[l.dim], m.count)
		if sign > 0 {
			*target = resources.SaturatingAdd(*target, amount)
		} else {
			*target = resources.FlooredSub(*target, amount)
		}
	}
}

// loadCapacity converts a node's capacity into what one such node counts,
// without allocating.
func (s *Set) loadCapacity(dst resources.Vector, node *corev1.Node) {
	clear(dst)
	if node != nil {
		capacity := node.Status.Capacity
		for pos, name := range s.resourceNames {
			if q, ok := capacity[name]; ok {
				units := resources.Units(name, q)
				if name == corev1.ResourceCPU {
					units = wholeCores(units)
				}
				dst[pos] = units
			}
		}
	}
	if s.nodesAt >= 0 {
		dst[s.nodesAt] = 1
	}
}

// wholeCores rounds millicores up to a whole number of cores (still in
// millicores, the unit cpu vectors use).
func wholeCores(milli int64) int64 {
	if milli >= resources.Unlimited-999 {
		return resources.Unlimited
	}
	return (milli + 999) / 1000 * 1000
}
