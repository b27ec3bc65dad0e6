package elastic

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/resources"
)

// podStore keeps what each tracked pod was charged. Records and charge vectors
// live in slices with a free list, so pods coming and going reuse memory
// instead of allocating per pod.
type podStore struct {
	dims    int
	slotOf  map[types.UID]int
	records []podRecord
	charges []int64 // dims per slot
	vacant  []int
}

type podRecord struct {
	uid       types.UID
	namespace string
	leaf      int // -1 when no leaf lists the namespace
	requests  corev1.ResourceList
	live      bool
	leaving   bool // on its way out: see Tree.leaving
}

func newPodStore(dims int) podStore {
	return podStore{dims: dims, slotOf: map[types.UID]int{}}
}

func (p *podStore) charge(slot int) resources.Vector {
	return p.charges[slot*p.dims : (slot+1)*p.dims : (slot+1)*p.dims]
}

func (p *podStore) allocate(uid types.UID) int {
	var slot int
	if n := len(p.vacant); n > 0 {
		slot = p.vacant[n-1]
		p.vacant = p.vacant[:n-1]
	} else {
		slot = len(p.records)
		p.records = append(p.records, podRecord{})
		p.charges = append(p.charges, make([]int64, p.dims)...)
	}
	p.records[slot] = podRecord{uid: uid, live: true}
	p.slotOf[uid] = slot
	return slot
}

func (p *podStore) free(uid types.UID, slot int) {
	delete(p.slotOf, uid)
	p.records[slot] = podRecord{}
	p.vacant = append(p.vacant, slot)
}
