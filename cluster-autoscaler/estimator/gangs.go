package estimator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

// Gang is pods that take new nodes together or not at all: kube-scheduler
// holds a gang's pods at Permit until enough of them are placed, so nodes for
// part of a gang stay idle.
type Gang struct {
	// Pods are the gang's unit, the members its quota admits as one: all of
	// them are placed, or none.
	Pods []Pod
	// Past are the gang's members past its unit, which its quota judges one
	// by one: once the unit is placed, each is placed as a pod of no gang,
	// where it fits; while the unit is not, none is.
	Past []Pod
}

// GangResult is what an estimate did with one gang.
type GangResult struct {
	Placed bool
	// Nodes is, for a gang left out, how many new nodes it would take if the
	// limit allowed; 0 when it does not fit new nodes of the group at all.
	Nodes int
}

// BinpackGangs is Binpack with gangs. The pods of no gang are packed first,
// exactly as Binpack packs them, so that gangs change nothing for them; then
// each gang in turn, largest pods first, on the new nodes left room and more
// new nodes within the limit. A gang whose unit cannot be placed whole
// leaves the estimate as it found it: no node, no placement, for its members
// past the unit neither; after a unit placed, those members are packed as
// pods of no gang. Result.Gangs says, in the order of gangs, which were
// placed.
func BinpackGangs(ctx context.Context, snapshot *simulator.Snapshot, pods []Pod, gangs []Gang, newNode NewNode, template fwk.NodeInfo,
	limit int, maxDuration time.Duration) (Result, error) {
	snapshot.Fork()
	defer snapshot.Revert()
	k := newPacker(snapshot, newNode, template, limit, maxDuration)
	k.fork(pods)
	for _, g := range gangs {
		k.fork(g.Pods)
		k.fork(g.Past)
	}
	var res Result
	if err := k.placeEach(ctx, pods, &res); err != nil {
		return Result{}, err
	}
	for _, g := range gangs {
		gr, err := k.placeGang(ctx, g, &res)
		if err != nil {
			return Result{}, err
		}
		res.Gangs = append(res.Gangs, gr)
	}
	res.NodeCount, res.TimedOut = k.used, k.timedOut
	return res, nil
}

// placeGang places g's unit whole or not at all, then the members past it
// one by one, adding its pods to res.
func (k *packer) placeGang(ctx context.Context, g Gang, res *Result) (GangResult, error) {
	ordered := k.bySize(g.Pods)
	need := len(ordered)
	placed, _, _, err := k.trial(ctx, ordered, need, k.limit, true)
	if err != nil {
		return GangResult{}, err
	}
	for _, p := range ordered {
		if placed[p.Pod] {
			res.Scheduled = append(res.Scheduled, p.Pod)
		} else {
			res.Unscheduled = append(res.Unscheduled, p.Pod)
		}
	}
	if placed != nil {
		return GangResult{Placed: true}, k.placeEach(ctx, g.Past, res)
	}
	for _, p := range g.Past {
		res.Unscheduled = append(res.Unscheduled, p.Pod)
	}
	// How far short the limit fell: the same placement with as many more
	// new nodes as the gang has pods, all it could ever use, and no deadline.
	deadline := k.deadline
	k.deadline = time.Time{}
	defer func() { k.deadline = deadline }()
	_, count, used, err := k.trial(ctx, ordered, need, k.used+len(ordered), false)
	if err != nil || count < need {
		return GangResult{}, err
	}
	return GangResult{Nodes: used - k.used}, nil
}

// placeEach places pods one by one, largest first, each where it fits,
// adding them to res.
func (k *packer) placeEach(ctx context.Context, pods []Pod, res *Result) error {
	for _, p := range k.bySize(pods) {
		placed, err := k.place(ctx, p)
		if err != nil {
			return err
		}
		if placed {
			res.Scheduled = append(res.Scheduled, p.Pod)
		} else {
			res.Unscheduled = append(res.Unscheduled, p.Pod)
		}
	}
	return nil
}

// trial places pods in order on at most limit new nodes. When keep is set and
// at least need of them are placed, the placement stays and placed holds the
// pods placed; otherwise the packer is back as it was and placed is nil.
// count and used are how many pods were placed and how many new nodes they
// took.
//
// A trial costs what it places, not what the estimate holds: of the checks,
// only those it can change get a copy of their own (a placement undone must
// not stay in the PreFilter state of the pods that saw it), the pods' own and
// those that follow placements, and the firstTry entries it changes are
// noted to be put back.
func (k *packer) trial(ctx context.Context, pods []Pod, need, limit int, keep bool) (placed map[*corev1.Pod]bool, count, used int, err error) {
	saved := *k
	was := map[*simulator.PodCheck]*simulator.PodCheck{}
	own := func(orig *simulator.PodCheck) *simulator.PodCheck {
		if _, copied := was[orig]; !copied {
			was[orig] = k.checks[orig]
			k.checks[orig] = k.checks[orig].Fork()
		}
		return k.checks[orig]
	}
	k.following = make([]*simulator.PodCheck, len(saved.following))
	for i, orig := range k.followingOf {
		k.following[i] = own(orig)
	}
	for _, p := range pods {
		own(p.Check)
	}
	k.firstTryWas = map[int]int{}
	undo := func() {
		k.snapshot.Revert()
		for orig, c := range was {
			k.checks[orig] = c
		}
		for group, i := range k.firstTryWas {
			if i == 0 {
				delete(k.firstTry, group) // it had none: 0 reads the same
			} else {
				k.firstTry[group] = i
			}
		}
		*k = saved
	}
	k.limit = limit
	k.snapshot.Fork()
	placed = map[*corev1.Pod]bool{}
	for _, p := range pods {
		ok, err := k.place(ctx, p)
		if err != nil {
			undo()
			return nil, 0, 0, err
		}
		if ok {
			placed[p.Pod] = true
		}
	}
	count, used = len(placed), k.used
	if keep && count >= need {
		k.snapshot.Commit()
		k.limit, k.firstTryWas = saved.limit, nil
		return placed, count, used, nil
	}
	undo()
	return nil, count, used, nil
}

// setFirstTry moves group's first new node worth trying to i, noting what it
// was during a trial.
func (k *packer) setFirstTry(group, i int) {
	if k.firstTryWas != nil {
		if _, noted := k.firstTryWas[group]; !noted {
			k.firstTryWas[group] = k.firstTry[group]
		}
	}
	k.firstTry[group] = i
}
