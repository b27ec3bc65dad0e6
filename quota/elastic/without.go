package elastic

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/resources"
)

// Without is a scratch copy of the usage as it will be once the tracked pods
// gone, and the pods already on their way out, are released: the usage a
// reclaim plan (PlanReclaim) counts on. A scheduler that tries a plan before
// acting on it (a pod group placed as if the victims were gone) admits
// against it, so the trial agrees with the plan. Pods the tree does not
// track, does not govern or already sees leaving are released once, as
// leaving, or not at all.
func (t *Tree) Without(gone []types.UID) *Scratch {
	s := t.Scratch()
	for i, l := range t.leaving.used {
		s.used[i] = resources.FlooredSub(s.used[i], l)
	}
	for _, uid := range gone {
		slot, tracked := t.pods.slotOf[uid]
		if !tracked {
			continue
		}
		record := &t.pods.records[slot]
		if record.leaving || record.leaf < 0 {
			continue
		}
		s.release(record.leaf, t.pods.charge(slot))
	}
	return s
}
