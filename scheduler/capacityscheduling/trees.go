package capacityscheduling

import (
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// treeLifecycle decides which ElasticQuotaTree is in force and what every tree
// object is told on its status. The decision is elastic.Tracker's, the same the
// autoscaler and kubectl-quota make: only a tree in kube-system is in force, the
// oldest one if there are several, and an invalid generation leaves the last
// valid generation of that object in force.
type treeLifecycle struct {
	tracker elastic.Tracker
	// inForce is the object and generation the tree in force was built from,
	// with the spec status.lastValid records.
	inForce elastic.TreeInForce
	// decisions are keyed by namespace/name.
	decisions map[string]treeDecision
}

type generationRef struct {
	uid        types.UID
	generation int64
}

type treeDecision struct {
	ref generationRef
	// problems is empty when the generation is valid.
	problems string
	active   metav1.Condition
}

// treeEvent is an event to record about a tree object.
type treeEvent struct {
	tree      *schedulingv1beta1.ElasticQuotaTree
	eventType string
	reason    string
	note      string
}

const (
	eventReasonInvalid  = "InvalidElasticQuotaTree"
	eventReasonEnforced = "ElasticQuotaTreeEnforced"
)

// syncTreesLocked reconciles the tree in force with the tree objects. It returns
// the events to record; the caller records them after releasing the lock.
func (c *quotaCache) syncTreesLocked(logger klog.Logger, trees []*schedulingv1beta1.ElasticQuotaTree) []treeEvent {
	lc := &c.lifecycle
	sort.Slice(trees, func(i, j int) bool { return elastic.OlderFirst(trees[i], trees[j]) })
	obs := lc.tracker.Observe(trees)
	var events []treeEvent
	if obs.Changed {
		events = c.enforceLocked(logger, obs)
	}
	lc.inForce = obs.InForce

	decisions := make(map[string]treeDecision, len(obs.Trees))
	for _, v := range obs.Trees {
		t := v.Object
		d := treeDecision{ref: generationRef{uid: t.UID, generation: t.Generation}, problems: problemsOf(v.Err)}
		if v.NewlyInvalid {
			logger.Info("Invalid ElasticQuotaTree", "tree", klog.KObj(t), "generation", t.Generation, "problems", d.problems)
			events = append(events, treeEvent{t, "Warning", eventReasonInvalid, d.problems})
		}
		d.active = activeCondition(t, obs.Chosen, d, obs.InForce)
		decisions[t.Namespace+"/"+t.Name] = d
	}
	lc.decisions = decisions
	// Not a change of usage: a swap of the tree in force is marked by
	// setTreeLocked, and a change of conditions is written at the next tick
	// whatever usage does. Marking every sync would let the status writer's
	// own updates hold back the figures.
	return events
}

// enforceLocked puts the generation the tracker chose in force, re-charging
// the pods of the tree it replaces.
func (c *quotaCache) enforceLocked(logger klog.Logger, obs elastic.Observation) []treeEvent {
	if obs.InForce.Tree == nil {
		if obs.Chosen == nil {
			logger.Info("No ElasticQuotaTree in kube-system; quota is no longer enforced")
		} else {
			logger.Info("The ElasticQuotaTree in force has no valid generation; quota is no longer enforced", "tree", klog.KObj(obs.Chosen))
		}
		c.setTreeLocked(logger, nil)
		return nil
	}
	next := obs.InForce.Tree.Uncharged()
	if c.tree != nil {
		next.ChargeFrom(c.tree)
	}
	c.setTreeLocked(logger, next)
	logger.Info("ElasticQuotaTree in force", "tree", klog.KObj(obs.Chosen), "generation", obs.InForce.Generation, "current", obs.InForce.Current)
	return []treeEvent{{obs.Chosen, "Normal", eventReasonEnforced, fmt.Sprintf("generation %d is in force", obs.InForce.Generation)}}
}

func problemsOf(err error) string {
	if err == nil {
		return ""
	}
	var verr *elastic.ValidationError
	if errors.As(err, &verr) {
		return verr.Message()
	}
	return err.Error()
}

func activeCondition(t, chosen *schedulingv1beta1.ElasticQuotaTree, d treeDecision, inForce elastic.TreeInForce) metav1.Condition {
	cond := metav1.Condition{Type: schedulingv1beta1.ConditionActive, Status: metav1.ConditionFalse}
	switch {
	case t.Namespace != schedulingv1beta1.EnforcedNamespace:
		cond.Reason = schedulingv1beta1.ReasonIgnored
		cond.Message = "only an ElasticQuotaTree in kube-system is in force; this one is ignored"
	case t != chosen:
		cond.Reason = schedulingv1beta1.ReasonSuperseded
		cond.Message = fmt.Sprintf("kube-system/%s is older and is the tree in force; only one tree is enforced", chosen.Name)
	case d.problems == "":
		cond.Status = metav1.ConditionTrue
		cond.Reason = schedulingv1beta1.ReasonEnforced
		cond.Message = fmt.Sprintf("generation %d is in force", t.Generation)
	case inForce.Tree != nil && inForce.UID == t.UID:
		cond.Status = metav1.ConditionTrue
		cond.Reason = schedulingv1beta1.ReasonInvalid
		cond.Message = fmt.Sprintf("generation %d is invalid; generation %d stays in force", t.Generation, inForce.Generation)
	default:
		cond.Reason = schedulingv1beta1.ReasonInvalid
		cond.Message = "this tree is invalid and has no earlier valid generation; no quota is enforced"
	}
	return cond
}

func validCondition(d treeDecision) metav1.Condition {
	if d.problems == "" {
		return metav1.Condition{Type: schedulingv1beta1.ConditionValid, Status: metav1.ConditionTrue,
			Reason: schedulingv1beta1.ReasonValid, Message: "the tree satisfies every rule"}
	}
	return metav1.Condition{Type: schedulingv1beta1.ConditionValid, Status: metav1.ConditionFalse,
		Reason: schedulingv1beta1.ReasonInvalid, Message: d.problems}
}
