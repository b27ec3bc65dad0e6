package claims

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/elastic"
)

// ChargeCounted charges t with a pod the tree counts (elastic.Charged), as a
// program rebuilding usage from the pods it sees does: the pod's own charge
// under its UID (marked leaving if the pod is), and each shared claim once
// under its key, however many pods use it. A nil lookup charges the pod's
// requests alone. The error is PodCharge's: what could not be read is left
// out of the charge, never charged twice. It reports whether the pod is
// counted.
func ChargeCounted(t *elastic.Tree, pod *corev1.Pod, lookup Lookup) (bool, error) {
	if lookup == nil {
		return t.AddPod(pod), nil
	}
	ch, err := PodCharge(pod, lookup)
	counted := t.AddRequests(pod.UID, pod.Namespace, ch.Own)
	if elastic.Leaving(pod) {
		t.MarkLeaving(pod.UID)
	}
	for _, s := range ch.Shared {
		t.AddRequests(s.Key, pod.Namespace, s.Requests)
	}
	return counted, err
}
