package elastic

import (
	corev1 "k8s.io/api/core/v1"
)

// AdmitAlone is Admit against a tree with nothing charged: whether requests
// could ever fit the max of namespace's leaf and every ancestor. A refusal
// here is not about what others use, so no reclaim or wait can change it;
// only a larger max can. It allocates; it is for the refusal path.
func (t *Tree) AdmitAlone(namespace string, requests corev1.ResourceList) Verdict {
	empty := newUsage(t.shape)
	return empty.admit(namespace, requests)
}
