package elastic

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// AdmitAlone is Admit against a tree with nothing charged: whether requests
// could ever fit the max of namespace's leaf and every ancestor. A refusal
// here is not about what others use, so no reclaim or wait can change it;
// only a larger max can. It allocates; it is for the refusal path.
func (t *Tree) AdmitAlone(namespace string, requests corev1.ResourceList) Verdict {
	empty := newUsage(t.shape)
	return empty.admit(namespace, requests)
}

// AdmitBesides is Admit as if held, charged to namespace's leaf, were
// released: whether a pod fits into room kept for it, such as its gang's
// reservation. It walks the pod's path only; only a refusal copies the usage.
func (t *Tree) AdmitBesides(namespace string, requests, held corev1.ResourceList) Verdict {
	leaf, governed := t.shape.leafOf[namespace]
	if !governed {
		return Verdict{}
	}
	index := t.shape.index
	request, kept := index.Requests(requests), index.Requests(held)
	fits := true
	for pos := leaf; pos >= 0 && fits; pos = t.shape.nodes[pos].parent {
		used, limit := t.usedAt(pos), t.shape.nodes[pos].max
		for d, r := range request {
			if r > 0 && resources.SaturatingAdd(resources.FlooredSub(used[d], kept[d]), r) > limit[d] {
				fits = false
				break
			}
		}
	}
	if fits {
		return Verdict{Leaf: t.shape.nodes[leaf].name}
	}
	scratch := t.Scratch()
	scratch.Release(namespace, held)
	return scratch.Admit(namespace, requests)
}
