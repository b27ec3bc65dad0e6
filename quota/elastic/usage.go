package elastic

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// usage is per-node usage over a shape: one flat int64 slice, node after
// node, so copying it for a what-if is a single allocation.
type usage struct {
	shape   *shape
	used    []int64
	request resources.Vector // scratch for converting requests without allocating
}

func newUsage(s *shape) usage {
	return usage{shape: s, used: make([]int64, len(s.nodes)*s.index.Len()), request: s.index.Zero()}
}

func (u *usage) copyUsage() usage {
	return usage{shape: u.shape, used: append([]int64(nil), u.used...), request: u.shape.index.Zero()}
}

func (u *usage) usedAt(pos int) resources.Vector {
	dims := u.shape.index.Len()
	return u.used[pos*dims : (pos+1)*dims : (pos+1)*dims]
}

// loadRequest converts requests into the shared scratch vector. The result is
// valid until the next call.
func (u *usage) loadRequest(requests corev1.ResourceList) resources.Vector {
	u.shape.index.Load(u.request, requests, 0)
	return u.request
}

// charge adds request to leaf and every ancestor: O(depth x dims).
func (u *usage) charge(leaf int, request resources.Vector) {
	for pos := leaf; pos >= 0; pos = u.chargedParent(pos) {
		u.usedAt(pos).Add(request)
	}
}

func (u *usage) release(leaf int, request resources.Vector) {
	for pos := leaf; pos >= 0; pos = u.chargedParent(pos) {
		u.usedAt(pos).Sub(request)
	}
}

// chargedParent is the node charged after pos: its parent, or -1 at the root
// (and, with the planted bug of planted_bug.go, right away).
func (u *usage) chargedParent(pos int) int {
	if plantedLeafOnly {
		return -1
	}
	return u.shape.nodes[pos].parent
}

// fits is the allocation-free admission test; verdict explains a refusal.
func (u *usage) fits(leaf int, request resources.Vector) bool {
	for pos := leaf; pos >= 0; pos = u.shape.nodes[pos].parent {
		if !resources.Fits(u.usedAt(pos), request, u.shape.nodes[pos].max) {
			return false
		}
	}
	return true
}

func (u *usage) admit(namespace string, requests corev1.ResourceList) Verdict {
	leaf, governed := u.shape.leafOf[namespace]
	if !governed {
		return Verdict{}
	}
	request := u.loadRequest(requests)
	if u.fits(leaf, request) {
		return Verdict{Leaf: u.shape.nodes[leaf].name}
	}
	return u.verdict(leaf, request)
}

// usedList is a node's usage as canonical quantities: every resource the
// node names, plus any other tree resource it uses.
func (u *usage) usedList(pos int) corev1.ResourceList {
	named := u.shape.nodes[pos].named
	return u.shape.index.ListWhere(u.usedAt(pos), func(i int, units int64) bool { return named[i] || units > 0 })
}
