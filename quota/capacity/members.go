package capacity

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// member is what one registered node, or one node group's upcoming nodes,
// adds to the quotas its labels match: count times capacity.
type member struct {
	object   *corev1.Node // kept to re-add on Rebuild; must not be mutated
	set      *labelSet    // nil until first counted
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
	m := s.nodes[node.Name]
	if m == nil {
		m = &member{capacity: s.index.Zero()}
		s.nodes[node.Name] = m
	}
	s.replace(m, node, 1)
}

// UpdateNode is AddNode; it exists so informer handlers read naturally.
func (s *Set) UpdateNode(node *corev1.Node) { s.AddNode(node) }

// RemoveNode stops counting a node and reports whether it was counted.
func (s *Set) RemoveNode(name string) bool {
	old, ok := s.nodes[name]
	if !ok {
		return false
	}
	s.uncount(old)
	delete(s.nodes, name)
	return true
}

// UpcomingNodes is how many nodes of a group count as upcoming, the count
// SetUpcoming takes: the group's target less its registered nodes, and at
// least its instances without a registered node (unregistered). The target
// counts replicas the infrastructure has not started yet; the instances count
// failed and late ones, which hold capacity until they are gone even when the
// target no longer does. The autoscaler and kubectl-quota both count by it.
func UpcomingNodes(target, registered, unregistered int) int {
	return max(target-registered, unregistered, 0)
}

// SetUpcoming replaces what nodeGroup's not-yet-registered nodes count:
// count copies of template (kept like AddNode's nodes: do not mutate it).
// Callers pass nodes still provisioning plus nodes planned earlier in the same
// loop, so two scale-ups in one loop cannot both spend the same headroom. A
// count of zero or less clears the group's upcoming nodes; a nil template also
// forgets the group's last check (see AllowedDeltaFor).
func (s *Set) SetUpcoming(nodeGroup string, count int, template *corev1.Node) {
	count -= plantedUpcomingMiss
	g := s.groups[nodeGroup]
	if count <= 0 || template == nil {
		if g == nil {
			return
		}
		if g.upcoming != nil {
			s.uncount(g.upcoming)
			g.upcoming = nil
		}
		if template == nil {
			s.detach(&g.answer)
			delete(s.groups, nodeGroup)
		}
		return
	}
	if g == nil {
		g = s.newGroup(nodeGroup)
	}
	if g.upcoming == nil {
		g.upcoming = &member{capacity: s.index.Zero(), upcoming: true}
	}
	s.replace(g.upcoming, template, int64(count))
}

// replace makes m count count copies of node. A new object with the labels
// and capacity m already counts, the same count too, changes nothing: nodes
// and templates are often rebuilt unchanged. Otherwise each limit moves once,
// by the difference, so no check is forgotten for an intermediate state.
func (s *Set) replace(m *member, node *corev1.Node, count int64) {
	set, capacity := m.set, m.capacity
	if m.object != node {
		set, capacity = s.labelSetOf(node.Labels), s.perNode
		s.loadCapacity(capacity, node)
	}
	m.object = node
	if set == m.set {
		if count == m.count && capacity.Equal(m.capacity) {
			return
		}
		for _, li := range set.limits {
			dim := s.limits[li].dim
			s.shift(li, m.upcoming, resources.SaturatingMul(m.capacity[dim], m.count), resources.SaturatingMul(capacity[dim], count))
		}
	} else {
		if m.set != nil {
			s.uncount(m)
		}
		for _, li := range set.limits {
			s.shift(li, m.upcoming, 0, resources.SaturatingMul(capacity[s.limits[li].dim], count))
		}
	}
	m.set, m.count = set, count
	copy(m.capacity, capacity)
}

// uncount removes m's contribution.
func (s *Set) uncount(m *member) {
	for _, li := range m.set.limits {
		s.shift(li, m.upcoming, resources.SaturatingMul(m.capacity[s.limits[li].dim], m.count), 0)
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
