package resources

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Index interns resource names to dense positions. Positions follow the
// sorted order of the names, so walking a vector from position 0 upwards
// visits resources alphabetically and every list derived from a vector comes
// out sorted without a sort call.
//
// An Index is immutable once built and safe to share.
type Index struct {
	names    []corev1.ResourceName
	position map[corev1.ResourceName]int
}

// NewIndex interns names; duplicates collapse.
func NewIndex(names ...corev1.ResourceName) *Index {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	ix := &Index{names: sorted, position: make(map[corev1.ResourceName]int, len(sorted))}
	for i, name := range sorted {
		ix.position[name] = i
	}
	return ix
}

// IndexOf interns every resource name that appears in lists.
func IndexOf(lists ...corev1.ResourceList) *Index {
	var names []corev1.ResourceName
	for _, list := range lists {
		for name := range list {
			names = append(names, name)
		}
	}
	return NewIndex(names...)
}

// Len is the number of dimensions of vectors over ix.
func (ix *Index) Len() int { return len(ix.names) }

// Names returns the interned names in position order (sorted).
func (ix *Index) Names() []corev1.ResourceName { return slices.Clone(ix.names) }

// Name is the resource at position pos.
func (ix *Index) Name(pos int) corev1.ResourceName { return ix.names[pos] }

// Position is where name lives, if it is interned.
func (ix *Index) Position(name corev1.ResourceName) (int, bool) {
	pos, ok := ix.position[name]
	return pos, ok
}

// Zero is a fresh all-zero vector, the identity for usage.
func (ix *Index) Zero() Vector { return make(Vector, len(ix.names)) }

// Requests converts a request-like list: a resource missing from it is zero.
// Resources the index does not know are dropped: nothing limits them.
func (ix *Index) Requests(list corev1.ResourceList) Vector {
	v := ix.Zero()
	ix.Load(v, list, 0)
	return v
}

// Limits converts a max-like list: a resource missing from it is Unlimited.
func (ix *Index) Limits(list corev1.ResourceList) Vector {
	v := ix.Zero()
	ix.Load(v, list, Unlimited)
	return v
}

// Load overwrites dst with list, using missing for resources list does not
// name. It is the allocation-free form of Requests and Limits for callers that
// keep a scratch vector.
func (ix *Index) Load(dst Vector, list corev1.ResourceList, missing int64) {
	for i := range dst {
		dst[i] = missing
	}
	for name, q := range list {
		if pos, ok := ix.position[name]; ok {
			dst[pos] = Units(name, q)
		}
	}
}

// List converts v back, leaving out Unlimited dimensions so a max list
// round-trips to what was written.
func (ix *Index) List(v Vector) corev1.ResourceList {
	return ix.ListWhere(v, func(_ int, units int64) bool { return units != Unlimited })
}

// ListWhere converts the dimensions of v that keep accepts.
func (ix *Index) ListWhere(v Vector, keep func(pos int, units int64) bool) corev1.ResourceList {
	list := corev1.ResourceList{}
	for pos, units := range v {
		if keep(pos, units) {
			list[ix.names[pos]] = ix.Quantity(pos, units)
		}
	}
	return list
}

// Quantity is units at position pos as a canonical quantity.
func (ix *Index) Quantity(pos int, units int64) resource.Quantity {
	return Quantity(ix.names[pos], units)
}

// Format is units at position pos for people (see Format).
func (ix *Index) Format(pos int, units int64) string {
	return Format(ix.names[pos], units)
}
