package elastic

import (
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// Tracker follows a cluster's ElasticQuotaTree objects from one observation to
// the next and decides which generation of which object is in force: the
// object InForce chooses, at the generation LastValid picks given the
// generation this tracker put in force before. An invalid generation thus
// leaves the last valid one in force whether this tracker saw it (kept between
// observations) or only status.lastValid records it (a program started while
// the spec is invalid). The scheduler and the autoscaler each keep one;
// kubectl-quota, which looks once, observes once with a new one.
//
// What it remembers is bounded by the objects that exist, however many
// generations they go through. It is not safe for concurrent use.
type Tracker struct {
	inForce TreeInForce
	// err is why the chosen object's own spec is not in force.
	err error
	// decided is what the last decision was made from; the same again (a
	// status write, say) decides nothing anew.
	decided decidedFrom
	// verdicts are on the objects of the last observation, by namespace/name.
	verdicts map[string]verdict
}

type decidedFrom struct {
	uid types.UID
	// generation is the chosen object's; recorded is its status.lastValid's.
	generation, recorded int64
}

type verdict struct {
	uid        types.UID
	generation int64
	err        error
}

// TreeInForce is the generation of a tree object that is in force.
type TreeInForce struct {
	// UID is the object's; empty when no tree is in force.
	UID types.UID
	// Enforced.Tree is nil when no tree is in force. The tracker keeps that
	// model uncharged and hands it out on every observation while the same
	// generation is in force: callers charge a copy (Tree.Uncharged).
	Enforced
}

// Observation is what one look at the tree objects decided.
type Observation struct {
	// Chosen is the object InForce chose among those observed; nil when there
	// is none.
	Chosen *schedulingv1beta1.ElasticQuotaTree
	// InForce is the generation in force: one of Chosen's, or none when Chosen
	// has no valid generation.
	InForce TreeInForce
	// Changed reports whether another generation, or none, is in force than
	// after the previous observation.
	Changed bool
	// Err is why Chosen's own spec is not in force (elastic.LastValid's
	// error), nil when it is.
	Err error
	// Trees are the verdicts on the observed objects, in the order observed.
	Trees []TreeVerdict
}

// TreeVerdict is whether one tree object's own spec is valid.
type TreeVerdict struct {
	Object *schedulingv1beta1.ElasticQuotaTree
	// Err wraps a *ValidationError listing every problem; nil when valid.
	Err error
	// NewlyInvalid is true the first time this tracker observes an invalid
	// generation, so that it is reported once rather than at every look.
	NewlyInvalid bool
}

// Observe decides from trees, every ElasticQuotaTree object of the cluster.
func (t *Tracker) Observe(trees []*schedulingv1beta1.ElasticQuotaTree) Observation {
	before := t.inForce
	obs := Observation{Chosen: InForce(trees)}
	t.decide(obs.Chosen)
	obs.InForce, obs.Err = t.inForce, t.err
	obs.Changed = before.UID != t.inForce.UID || before.Generation != t.inForce.Generation
	obs.Trees = t.judge(trees)
	return obs
}

func (t *Tracker) decide(chosen *schedulingv1beta1.ElasticQuotaTree) {
	if chosen == nil {
		t.inForce, t.decided, t.err = TreeInForce{}, decidedFrom{}, nil
		return
	}
	from := decidedFrom{uid: chosen.UID, generation: chosen.Generation}
	if chosen.Status.LastValid != nil {
		from.recorded = chosen.Status.LastValid.Generation
	}
	if from == t.decided {
		return
	}
	t.decided = from
	var remembered *schedulingv1beta1.TreeGeneration
	same := t.inForce.Tree != nil && t.inForce.UID == chosen.UID
	if same {
		remembered = &schedulingv1beta1.TreeGeneration{Generation: t.inForce.Generation, Spec: *t.inForce.Spec}
	}
	enforced, err := LastValid(chosen, remembered)
	t.err = err
	switch {
	case enforced.Tree == nil:
		t.inForce = TreeInForce{}
	case same && enforced.Generation == t.inForce.Generation:
		// Still the same generation: its model stays, only Current may move.
		t.inForce.Current = enforced.Current
	default:
		t.inForce = TreeInForce{UID: chosen.UID, Enforced: enforced}
	}
}

// judge validates each object once per generation and forgets the objects
// that are gone.
func (t *Tracker) judge(trees []*schedulingv1beta1.ElasticQuotaTree) []TreeVerdict {
	verdicts := make(map[string]verdict, len(trees))
	out := make([]TreeVerdict, 0, len(trees))
	for _, obj := range trees {
		if obj == nil {
			continue
		}
		key := obj.Namespace + "/" + obj.Name
		v, known := t.verdicts[key]
		fresh := !known || v.uid != obj.UID || v.generation != obj.Generation
		if fresh {
			_, err := Build(obj)
			v = verdict{uid: obj.UID, generation: obj.Generation, err: err}
		}
		verdicts[key] = v
		out = append(out, TreeVerdict{Object: obj, Err: v.err, NewlyInvalid: fresh && v.err != nil})
	}
	t.verdicts = verdicts
	return out
}
