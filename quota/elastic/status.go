package elastic

import (
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// Status is the figures of every node in depth-first preorder, ready for
// ElasticQuotaTree.status.quotas.
func (t *Tree) Status() []schedulingv1beta1.QuotaNodeStatus {
	out := make([]schedulingv1beta1.QuotaNodeStatus, 0, len(t.shape.nodes))
	for pos := range t.shape.nodes {
		out = append(out, t.figures(pos))
	}
	return out
}

// StatusHeld is Status with each quota node's Held: the part of its usage
// charged under the UIDs held selects. A program that knows which of its
// charges no bound pod shows (quota reserved for pods being bound, or held
// for a reclaim) says so there, so that a reader can add that part to what
// it sums from the bound pods itself.
func (t *Tree) StatusHeld(held func(types.UID) bool) []schedulingv1beta1.QuotaNodeStatus {
	out := t.Status()
	sums := newUsage(t.shape)
	for slot := range t.pods.records {
		if r := &t.pods.records[slot]; r.live && r.leaf >= 0 && held(r.uid) {
			sums.charge(r.leaf, t.pods.charge(slot))
		}
	}
	positive := func(_ int, units int64) bool { return units > 0 }
	for pos := range out {
		if list := t.shape.index.ListWhere(sums.usedAt(pos), positive); len(list) > 0 {
			out[pos].Held = list
		}
	}
	return out
}

// Figures is the status of one node by name.
func (t *Tree) Figures(name string) (schedulingv1beta1.QuotaNodeStatus, bool) {
	pos, ok := t.shape.byName[name]
	if !ok {
		return schedulingv1beta1.QuotaNodeStatus{}, false
	}
	return t.figures(pos), true
}

// figures derives borrowed and lent per resource: borrowed is usage above min
// (what a reclaim may take back), lent is min left idle (what others may
// borrow). Both list only resources where they are positive.
func (t *Tree) figures(pos int) schedulingv1beta1.QuotaNodeStatus {
	n := &t.shape.nodes[pos]
	used := t.usedAt(pos)
	index := t.shape.index
	borrowed, lent := index.Zero(), index.Zero()
	for dim := range used {
		borrowed[dim] = resources.FlooredSub(used[dim], n.min[dim])
		lent[dim] = resources.FlooredSub(n.min[dim], used[dim])
	}
	positive := func(_ int, units int64) bool { return units > 0 }
	status := schedulingv1beta1.QuotaNodeStatus{
		Name:     n.name,
		Used:     t.usedList(pos),
		Min:      t.shape.view(pos).Min(),
		Max:      t.shape.view(pos).Max(),
		Borrowed: index.ListWhere(borrowed, positive),
		Lent:     index.ListWhere(lent, positive),
	}
	if n.parent >= 0 {
		status.Parent = t.shape.nodes[n.parent].name
	}
	return status
}
