package nodetemplate

import (
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceSlicesFor copies the node-local ResourceSlices of node from for a
// template node called to, as FromNode copies the node: each copy is local
// to to, its pool renamed after to (a pool named after its node, the usual
// shape, takes to's name; another gets to's name appended), so that the
// devices of two simulated nodes never share an ID, and without what belongs
// to the original object (UID, version, owners). Slices of other nodes, or of
// no single node, are left out; the originals are not modified.
func ResourceSlicesFor(slices []*resourcev1.ResourceSlice, from, to string) []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	for _, s := range slices {
		if s == nil || s.Spec.NodeName == nil || *s.Spec.NodeName != from {
			continue
		}
		c := s.DeepCopy()
		c.ObjectMeta = metav1.ObjectMeta{Name: renamed(s.Name, from, to), Labels: c.Labels, Annotations: c.Annotations}
		c.Spec.NodeName = &to
		c.Spec.Pool.Name = renamed(s.Spec.Pool.Name, from, to)
		out = append(out, c)
	}
	return out
}

// renamed is name with from, as its prefix, replaced by to, or with to
// appended when name does not start with from.
func renamed(name, from, to string) string {
	if rest, ok := strings.CutPrefix(name, from); ok {
		return to + rest
	}
	return name + "-" + to
}
