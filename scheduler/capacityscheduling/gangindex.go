package capacityscheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/gang"
	"github.com/quotascale/quotascale/quota/resources"
)

// gangIndex keeps the live pods of every gang, by gang, as the pod informer
// delivers them: PreFilter reads a gang's members without listing every pod.
// Each pod is filed under the gang it named when last seen, so that a pod
// relabelled into another gang, or out of any, leaves its old gang at once,
// and a deleted pod is found whatever its last labels said.
type gangIndex struct {
	members map[gang.Key]map[types.UID]*corev1.Pod
	keyOf   map[types.UID]gang.Key
}

func newGangIndex() gangIndex {
	return gangIndex{members: map[gang.Key]map[types.UID]*corev1.Pod{}, keyOf: map[types.UID]gang.Key{}}
}

// update files pod under the gang it names now. It returns the gang it was
// filed under before, when that was another one or it left every gang.
func (ix gangIndex) update(pod *corev1.Pod) (left gang.Key, moved bool) {
	key, ok := gang.RefOf(pod)
	if !ok || pod.DeletionTimestamp != nil || resources.PodFinished(pod) {
		return ix.remove(pod.UID)
	}
	if was, filed := ix.keyOf[pod.UID]; filed && was != key {
		left, moved = ix.remove(pod.UID)
	}
	members := ix.members[key]
	if members == nil {
		members = map[types.UID]*corev1.Pod{}
		ix.members[key] = members
	}
	members[pod.UID] = pod
	ix.keyOf[pod.UID] = key
	return left, moved
}

// remove takes the pod of uid out of the gang it is filed under, and returns
// that gang.
func (ix gangIndex) remove(uid types.UID) (gang.Key, bool) {
	key, ok := ix.keyOf[uid]
	if !ok {
		return gang.Key{}, false
	}
	delete(ix.keyOf, uid)
	delete(ix.members[key], uid)
	if len(ix.members[key]) == 0 {
		delete(ix.members, key)
	}
	return key, true
}

// keyOfPod is the gang the pod of uid is filed under.
func (ix gangIndex) keyOfPod(uid types.UID) (gang.Key, bool) {
	key, ok := ix.keyOf[uid]
	return key, ok
}

// has says whether gang key has a live pod.
func (ix gangIndex) has(key gang.Key) bool { return len(ix.members[key]) > 0 }

// size is how many live pods gang key has.
func (ix gangIndex) size(key gang.Key) int { return len(ix.members[key]) }

// filed says whether the pod of uid is filed under gang key.
func (ix gangIndex) filed(key gang.Key, uid types.UID) bool {
	_, ok := ix.members[key][uid]
	return ok
}

// pods are the gang's pods in no particular order (gang.Members orders them).
func (ix gangIndex) pods(key gang.Key) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(ix.members[key]))
	for _, p := range ix.members[key] {
		out = append(out, p)
	}
	return out
}
