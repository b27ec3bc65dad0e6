package elastic

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// Tree is a validated ElasticQuotaTree with the usage of the pods charged to
// it. Build one with Build; replace it with Rebuild.
type Tree struct {
	usage
	// leaving is the part of usage charged by pods on their way out: being
	// deleted, marked for disruption, or just chosen as a preemption's victim.
	// They hold quota until they are gone, so admission counts them; the
	// guarantees of reclaim and preemption do not, since the capacity is
	// leaving whatever else is evicted.
	leaving usage
	pods    podStore
}

// Object is the namespace/name of the ElasticQuotaTree the model was built from.
func (t *Tree) Object() string { return t.shape.object }

// ResourceNames are the resources the tree limits, sorted. Requests for
// anything else are neither limited nor counted.
func (t *Tree) ResourceNames() []corev1.ResourceName { return t.shape.index.Names() }

// Root is the root quota node.
func (t *Tree) Root() Node { return t.shape.view(0) }

// Node finds a quota node by name.
func (t *Tree) Node(name string) (Node, bool) {
	pos, ok := t.shape.byName[name]
	if !ok {
		return Node{}, false
	}
	return t.shape.view(pos), true
}

// LeafFor finds, in O(1), the leaf that namespace is charged to.
func (t *Tree) LeafFor(namespace string) (Node, bool) {
	pos, ok := t.shape.leafOf[namespace]
	if !ok {
		return Node{}, false
	}
	return t.shape.view(pos), true
}

// Nodes lists every quota node in depth-first preorder.
func (t *Tree) Nodes() []Node {
	nodes := make([]Node, len(t.shape.nodes))
	for pos := range t.shape.nodes {
		nodes[pos] = t.shape.view(pos)
	}
	return nodes
}

// Admit decides whether a pod of namespace requesting requests may start:
// used plus the request must stay within max at the leaf and every ancestor,
// on every resource the request asks for. A namespace no leaf lists is always
// admitted (Verdict.Governed is false). It does not allocate when the request
// fits, and it does not charge anything: call AddPod once the pod is placed.
func (t *Tree) Admit(namespace string, requests corev1.ResourceList) Verdict {
	return t.admit(namespace, requests)
}

// AddPod charges pod to its namespace's leaf and all ancestors, computing its
// requests with resources.PodRequests. It is idempotent per UID and doubles as
// an update: a pod seen again with other requests is re-charged, and a pod that
// has terminated (Succeeded or Failed) is released, so an informer's add and
// update handlers can both call it. A pod on its way out is marked leaving
// (see KeepsGuarantees): one with a deletion timestamp, or with a true
// DisruptionTarget condition (Leaving). It reports whether the pod is counted.
// Which pods to add is Charged's answer.
func (t *Tree) AddPod(pod *corev1.Pod) bool {
	if resources.PodFinished(pod) {
		t.RemovePod(pod.UID)
		return false
	}
	return t.add(pod.UID, pod.Namespace, resources.PodRequests(pod), Leaving(pod))
}

// MarkLeaving marks a tracked pod leaving before the API shows it so: a
// preemption has just chosen it as a victim. Until its deletion is seen, a
// second preemption would otherwise count it as staying, and could take its
// quota node below min together with it. Like a deletion, the mark is not
// undone. It reports whether the pod is tracked.
func (t *Tree) MarkLeaving(uid types.UID) bool {
	slot, tracked := t.pods.slotOf[uid]
	if !tracked {
		return false
	}
	record := t.pods.records[slot]
	t.add(uid, record.namespace, record.requests, true)
	return true
}

// AddRequests is AddPod for callers that already computed the requests. The
// tree keeps the requests map to re-charge the pod on Rebuild; do not modify
// it afterwards. It does not check max: usage reflects what is placed, and
// admission is Admit's job. It does not allocate when uid is already tracked
// with the same requests, nor when it reuses the slot of a removed pod. A pod
// already marked leaving stays so: deletion is not undone.
func (t *Tree) AddRequests(uid types.UID, namespace string, requests corev1.ResourceList) bool {
	return t.add(uid, namespace, requests, false)
}

func (t *Tree) add(uid types.UID, namespace string, requests corev1.ResourceList, leaving bool) bool {
	leaf, governed := t.shape.leafOf[namespace]
	if !governed {
		leaf = -1
	}
	slot, tracked := t.pods.slotOf[uid]
	if tracked {
		record := &t.pods.records[slot]
		charge := t.pods.charge(slot)
		leaving = leaving || record.leaving
		if record.leaf == leaf && record.leaving == leaving && (leaf < 0 || charge.Equal(t.loadRequest(requests))) {
			record.namespace, record.requests = namespace, requests
			return governed
		}
		t.uncharge(record, charge)
	} else {
		slot = t.pods.allocate(uid)
	}
	record := &t.pods.records[slot]
	record.namespace, record.leaf, record.requests, record.leaving = namespace, leaf, requests, leaving
	charge := t.pods.charge(slot)
	if !governed {
		clear(charge)
		return false
	}
	t.shape.index.Load(charge, requests, 0)
	t.charge(leaf, charge)
	if leaving {
		t.leaving.charge(leaf, charge)
	}
	return true
}

// uncharge takes a record's charge off usage, and off leaving when it is.
func (t *Tree) uncharge(record *podRecord, charge resources.Vector) {
	if record.leaf < 0 {
		return
	}
	t.release(record.leaf, charge)
	if record.leaving {
		t.leaving.release(record.leaf, charge)
	}
}

// RemovePod releases a pod's charge. It is idempotent and reports whether the
// pod was tracked.
func (t *Tree) RemovePod(uid types.UID) bool {
	slot, tracked := t.pods.slotOf[uid]
	if !tracked {
		return false
	}
	t.uncharge(&t.pods.records[slot], t.pods.charge(slot))
	t.pods.free(uid, slot)
	return true
}

// PodCount is the number of pods tracked, counted or not.
func (t *Tree) PodCount() int { return len(t.pods.slotOf) }

// Tracks reports whether a pod is tracked (charged, when its namespace is
// governed). Moving a tracked pod to another node changes no usage, which is how
// a scale-down simulation asks the scheduler's plugin about it.
func (t *Tree) Tracks(uid types.UID) bool {
	_, ok := t.pods.slotOf[uid]
	return ok
}

// Used is the usage of the named node: every resource the node names plus any
// resource it uses.
func (t *Tree) Used(name string) (corev1.ResourceList, bool) {
	pos, ok := t.shape.byName[name]
	if !ok {
		return nil, false
	}
	return t.usedList(pos), true
}

// Rebuild builds spec and re-charges every pod this tree tracks, including
// pods whose namespace the old tree did not cover. The receiver is untouched,
// so on error the caller simply keeps using it.
func (t *Tree) Rebuild(spec *schedulingv1beta1.ElasticQuotaTree) (*Tree, error) {
	next, err := Build(spec)
	if err != nil {
		return nil, err
	}
	next.ChargeFrom(t)
	return next, nil
}

// ChargeFrom charges t with every pod prev tracks, as Rebuild does, for a tree
// built another way (LastValid, say). prev is untouched.
func (t *Tree) ChargeFrom(prev *Tree) {
	for slot := range prev.pods.records {
		record := &prev.pods.records[slot]
		if record.live {
			t.add(record.uid, record.namespace, record.requests, record.leaving)
		}
	}
}

// Scratch copies the usage (one slice) for what-ifs such as the autoscaler
// admitting a loop's pending pods one after another. Pod tracking is not
// copied; the scratch only adds and releases amounts.
func (t *Tree) Scratch() *Scratch {
	return &Scratch{usage: t.copyUsage()}
}

// Scratch is a disposable copy of a tree's usage that shares its structure.
type Scratch struct {
	usage
}

// Admit is Tree.Admit against the scratch usage.
func (s *Scratch) Admit(namespace string, requests corev1.ResourceList) Verdict {
	return s.admit(namespace, requests)
}

// Add admits requests and, only if they fit, charges them, so pending pods
// offered in turn take the room one by one. The verdict says what happened.
func (s *Scratch) Add(namespace string, requests corev1.ResourceList) Verdict {
	verdict := s.admit(namespace, requests)
	if verdict.Admitted() && verdict.Governed() {
		s.charge(s.shape.leafOf[namespace], s.request)
	}
	return verdict
}

// Release takes requests off namespace's leaf and ancestors, e.g. for a pod
// the caller plans to evict. It reports whether the namespace is governed.
func (s *Scratch) Release(namespace string, requests corev1.ResourceList) bool {
	leaf, governed := s.shape.leafOf[namespace]
	if governed {
		s.release(leaf, s.loadRequest(requests))
	}
	return governed
}
