package elastic

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/resources"
)

// KeepsGuarantees reports whether evicting the distinct tracked pods victims,
// to make node room for a pod of namespace that its quota admits, leaves every
// other owner's guarantee whole: on every quota node a victim is charged to and
// the preemptor is not, used stays at or above min on every resource the
// victims hold once they are all gone, and so are the pods already being
// deleted (whose eviction an earlier preemption may have counted on). The
// nodes on the preemptor's own path are not constrained: its pod takes the
// victims' place there, within max. Victims the tree does not track, does not
// govern, or already sees leaving, constrain nothing.
//
// Priority preemption uses it; reclaim (PlanReclaim) applies the same rule to
// the victims it picks itself.
func (t *Tree) KeepsGuarantees(namespace string, victims []types.UID) bool {
	onPath := t.pathOf(namespace)
	var released []int64
	dims := t.shape.index.Len()
	for _, uid := range victims {
		slot, tracked := t.pods.slotOf[uid]
		if !tracked || t.pods.records[slot].leaving {
			continue
		}
		charge := t.pods.charge(slot)
		for pos := t.pods.records[slot].leaf; pos >= 0 && !onPath[pos]; pos = t.shape.nodes[pos].parent {
			if released == nil {
				released = make([]int64, len(t.shape.nodes)*dims)
			}
			resources.Vector(released[pos*dims : (pos+1)*dims]).Add(charge)
		}
	}
	if released == nil {
		return true
	}
	for pos := range t.shape.nodes {
		gone, used, leaving, min := released[pos*dims:(pos+1)*dims], t.usedAt(pos), t.leaving.usedAt(pos), t.shape.nodes[pos].min
		for d, c := range gone {
			if c > 0 && resources.FlooredSub(resources.FlooredSub(used[d], leaving[d]), c) < min[d] {
				return false
			}
		}
	}
	return true
}

// ChargedWithin reports whether every tracked victim is charged only to quota
// nodes a pod of namespace is charged to as well: a pod of that same leaf, or
// of no leaf. Evicting such pods touches no other owner's quota at all.
func (t *Tree) ChargedWithin(namespace string, victims []types.UID) bool {
	onPath := t.pathOf(namespace)
	for _, uid := range victims {
		if slot, tracked := t.pods.slotOf[uid]; tracked {
			if leaf := t.pods.records[slot].leaf; leaf >= 0 && !onPath[leaf] {
				return false
			}
		}
	}
	return true
}

// pathOf marks the quota nodes a pod of namespace is charged to.
func (t *Tree) pathOf(namespace string) []bool {
	onPath := make([]bool, len(t.shape.nodes))
	if leaf, governed := t.shape.leafOf[namespace]; governed {
		for pos := leaf; pos >= 0; pos = t.shape.nodes[pos].parent {
			onPath[pos] = true
		}
	}
	return onPath
}
