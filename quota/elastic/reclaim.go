package elastic

import (
	"math/bits"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/resources"
)

// Preemptor is the pending pod a reclaim plan makes room for.
type Preemptor struct {
	Namespace string
	Requests  corev1.ResourceList
	Priority  int32
}

// Candidate is a running pod the caller would accept to evict. Its namespace
// and requests are taken from what the tree charged for UID, so a plan can
// never release more than was counted; candidates the tree does not count
// are ignored.
type Candidate struct {
	UID         types.UID
	Priority    int32
	Created     time.Time
	ViolatesPDB bool
}

// Plan lists the victims to evict, in the order they were chosen.
type Plan struct {
	Victims []types.UID
}

// PlanReclaim picks the pods to evict so the preemptor is admitted, or
// reports false when no allowed set of candidates makes it fit. When the
// preemptor already fits, or its namespace is not governed, the plan is empty
// and true: quota is not what stands in its way. So it is when the preemptor
// fits once the pods already being deleted are gone: the plan is made on the
// usage they leave behind, which also keeps a second reclaim, or a scheduler
// that restarted mid-reclaim, from counting the same leaving pods as room
// above another owner's min.
//
// Let P be the preemptor's leaf, V a candidate's leaf, and M the lowest node
// that is an ancestor of both (M = P = V for a pod of the same leaf). The
// "short" resources are those on which the preemptor does not fit some node
// of its path right now.
//
//   - Same leaf (V = P): ordinary priority preemption; only candidates with a
//     lower priority than the preemptor qualify, and quota mins play no part.
//   - Other leaf (reclaim): every node on P's path strictly below M must stay
//     within its min after admitting the preemptor, on every short resource
//     (used + request <= min). That is "an owner below its min reclaims":
//     a subtree may take capacity from outside itself only up to its own
//     guarantee. And every node on V's path strictly below M must keep
//     used >= min on every resource the victim requests once the victim is
//     gone, so reclaim never digs into another owner's guarantee. Nodes at
//     and above M are shared by both pods and are not constrained.
//   - A candidate qualifies only if it frees a short resource at a node where
//     the preemptor does not fit (at or above M).
//
// Choice, re-ranked after every victim: pods whose eviction would violate a
// PodDisruptionBudget last; reclaim victims before same-leaf ones; among
// reclaim victims the one whose leaf is furthest over its min, measured as the
// largest (used - min) / min over the short resources it frees (a min of zero
// ranks as infinitely over); then lower priority, then newer creation time,
// then UID.
// Choosing stops as soon as the preemptor fits; then victims are put back in
// reverse order of choice whenever the preemptor still fits without them, so
// no single victim of the plan is superfluous.
func (t *Tree) PlanReclaim(p Preemptor, candidates []Candidate) (Plan, bool) {
	leaf, governed := t.shape.leafOf[p.Namespace]
	if !governed {
		return Plan{}, true
	}
	request := t.shape.index.Requests(p.Requests)
	if t.fits(leaf, request) {
		return Plan{}, true
	}
	r := &reclaim{usage: t.copyUsage(), leaf: leaf, request: request}
	for i, gone := range t.leaving.used {
		r.used[i] = resources.FlooredSub(r.used[i], gone)
	}
	if r.fits(leaf, request) {
		return Plan{}, true
	}
	r.pool = t.resolveCandidates(candidates, leaf, p.Priority)
	var chosen []*victim
	for !r.fits(leaf, request) {
		best := r.pick()
		if best == nil {
			return Plan{}, false
		}
		best.taken = true
		r.release(best.leaf, best.charge)
		chosen = append(chosen, best)
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		v := chosen[i]
		r.charge(v.leaf, v.charge)
		if r.fits(leaf, request) {
			v.taken = false
			continue
		}
		r.release(v.leaf, v.charge)
	}
	plan := Plan{}
	for _, v := range chosen {
		if v.taken {
			plan.Victims = append(plan.Victims, v.UID)
		}
	}
	return plan, true
}

type victim struct {
	Candidate
	leaf     int
	meet     int // lowest common ancestor with the preemptor's leaf
	sameLeaf bool
	charge   resources.Vector
	taken    bool
}

type reclaim struct {
	usage
	leaf    int
	request resources.Vector
	pool    []*victim
	// shallowest[d] is the smallest depth at which the preemptor does not fit
	// on resource d, or 0 when d is not short.
	shallowest []int
}

// resolveCandidates keeps the candidates the tree counts, once each, and
// drops same-leaf pods that the preemptor may not preempt by priority.
func (t *Tree) resolveCandidates(candidates []Candidate, leaf int, priority int32) []*victim {
	onPath := make([]bool, len(t.shape.nodes))
	for pos := leaf; pos >= 0; pos = t.shape.nodes[pos].parent {
		onPath[pos] = true
	}
	seen := map[types.UID]bool{}
	var pool []*victim
	for _, c := range candidates {
		slot, tracked := t.pods.slotOf[c.UID]
		if !tracked || seen[c.UID] || t.pods.records[slot].leaf < 0 || t.pods.records[slot].leaving {
			continue
		}
		seen[c.UID] = true
		v := &victim{Candidate: c, leaf: t.pods.records[slot].leaf, charge: t.pods.charge(slot)}
		v.sameLeaf = v.leaf == leaf
		if v.sameLeaf && c.Priority >= priority {
			continue
		}
		v.meet = v.leaf
		for !onPath[v.meet] {
			v.meet = t.shape.nodes[v.meet].parent
		}
		pool = append(pool, v)
	}
	return pool
}

func (r *reclaim) pick() *victim {
	r.findShortfall()
	var best *victim
	var bestScore ratio
	for _, v := range r.pool {
		if v.taken || !r.useful(v) || !r.allowed(v) {
			continue
		}
		score := r.score(v)
		if best == nil || r.before(v, score, best, bestScore) {
			best, bestScore = v, score
		}
	}
	return best
}

func (r *reclaim) findShortfall() {
	if r.shallowest == nil {
		r.shallowest = make([]int, len(r.request))
	}
	clear(r.shallowest)
	for pos := r.leaf; pos >= 0; pos = r.shape.nodes[pos].parent {
		n := &r.shape.nodes[pos]
		used := r.usedAt(pos)
		for d, req := range r.request {
			if req > 0 && resources.SaturatingAdd(used[d], req) > n.max[d] {
				r.shallowest[d] = n.depth // walking upwards, the last write is the shallowest
			}
		}
	}
}

// useful: evicting v lowers usage at a node where the preemptor does not fit,
// on a resource it does not fit on. Only nodes at or above the meeting point
// see v's release.
func (r *reclaim) useful(v *victim) bool {
	meetDepth := r.shape.nodes[v.meet].depth
	for d, c := range v.charge {
		if c > 0 && r.shallowest[d] > 0 && r.shallowest[d] <= meetDepth {
			return true
		}
	}
	return false
}

// allowed applies the min rules of PlanReclaim to a reclaim victim.
func (r *reclaim) allowed(v *victim) bool {
	if v.sameLeaf {
		return true
	}
	for pos := r.leaf; pos != v.meet; pos = r.shape.nodes[pos].parent {
		n, used := &r.shape.nodes[pos], r.usedAt(pos)
		for d, req := range r.request {
			if r.shallowest[d] > 0 && resources.SaturatingAdd(used[d], req) > n.min[d] {
				return false
			}
		}
	}
	for pos := v.leaf; pos != v.meet; pos = r.shape.nodes[pos].parent {
		n, used := &r.shape.nodes[pos], r.usedAt(pos)
		for d, c := range v.charge {
			if c > 0 && resources.FlooredSub(used[d], c) < n.min[d] {
				return false
			}
		}
	}
	return true
}

// ratio is (used - min) / min kept as a fraction so ranking is exact; a zero
// denominator is infinitely over.
type ratio struct{ over, min int64 }

func (r *reclaim) score(v *victim) ratio {
	if v.sameLeaf {
		return ratio{}
	}
	n, used := &r.shape.nodes[v.leaf], r.usedAt(v.leaf)
	best := ratio{over: -1, min: 1}
	for d, c := range v.charge {
		if c > 0 && r.shallowest[d] > 0 {
			candidate := ratio{over: resources.FlooredSub(used[d], n.min[d]), min: n.min[d]}
			if best.over < 0 || candidate.compare(best) > 0 {
				best = candidate
			}
		}
	}
	return best
}

// compare orders ratios exactly: both terms are non-negative, so the cross
// products fit in 128 bits.
func (a ratio) compare(b ratio) int {
	switch {
	case a.min == 0 && b.min == 0:
		return 0
	case a.min == 0:
		return 1
	case b.min == 0:
		return -1
	}
	ahi, alo := bits.Mul64(uint64(a.over), uint64(b.min))
	bhi, blo := bits.Mul64(uint64(b.over), uint64(a.min))
	switch {
	case ahi != bhi:
		return compareUint(ahi, bhi)
	default:
		return compareUint(alo, blo)
	}
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// before reports whether a (scored sa) should be evicted before b.
func (r *reclaim) before(a *victim, sa ratio, b *victim, sb ratio) bool {
	if a.ViolatesPDB != b.ViolatesPDB {
		return !a.ViolatesPDB
	}
	if a.sameLeaf != b.sameLeaf {
		return !a.sameLeaf
	}
	if c := sa.compare(sb); c != 0 {
		return c > 0
	}
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.After(b.Created)
	}
	return strings.Compare(string(a.UID), string(b.UID)) < 0
}
