package elastic

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// Request is a pod's requests converted for one tree's resources, for callers
// that admit the same pod again and again (the scheduler retrying a pending
// pod): the conversion, a walk of the requests map, is done once. A Request is
// tied to the tree that made it; another tree, including a Rebuild of it,
// converts the requests again on use.
type Request struct {
	shape    *shape
	vector   resources.Vector
	requests corev1.ResourceList
}

// Request converts requests for t. The Request keeps requests; do not modify
// it afterwards.
func (t *Tree) Request(requests corev1.ResourceList) Request {
	return Request{shape: t.shape, vector: t.shape.index.Requests(requests), requests: requests}
}

// Requests are the requests r was made from.
func (r Request) Requests() corev1.ResourceList { return r.requests }

// For reports whether r was made by t, or by a tree sharing its shape (a
// Scratch).
func (r Request) For(t *Tree) bool { return r.shape == t.shape }

// AdmitRequest is Admit for a converted request. It does not allocate when the
// request fits.
func (t *Tree) AdmitRequest(namespace string, r Request) Verdict {
	if r.shape != t.shape {
		return t.admit(namespace, r.requests)
	}
	leaf, governed := t.shape.leafOf[namespace]
	if !governed {
		return Verdict{}
	}
	if t.fits(leaf, r.vector) {
		return Verdict{Leaf: t.shape.nodes[leaf].name}
	}
	return t.verdict(leaf, r.vector)
}
