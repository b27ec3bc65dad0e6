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
// object is told on its status. Only a tree in kube-system is in force, the oldest
// one if there are several; an invalid generation leaves the last valid tree in
// force.
type treeLifecycle struct {
	// inForce is the object and generation the tree in force was built from.
	inForce generationRef
	// decisions are keyed by namespace/name.
	decisions map[string]treeDecision
	// announced remembers the generations an event was already recorded for.
	announced map[generationRef]bool
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
	if lc.decisions == nil {
		lc.decisions = map[string]treeDecision{}
		lc.announced = map[generationRef]bool{}
	}
	sort.Slice(trees, func(i, j int) bool { return elastic.OlderFirst(trees[i], trees[j]) })
	chosen := elastic.InForce(trees)

	var events []treeEvent
	decisions := make(map[string]treeDecision, len(trees))
	for _, t := range trees {
		key := t.Namespace + "/" + t.Name
		ref := generationRef{uid: t.UID, generation: t.Generation}
		d, known := lc.decisions[key]
		var built *elastic.Tree
		if !known || d.ref != ref {
			d = treeDecision{ref: ref}
			var err error
			if t == chosen && ref != lc.inForce {
				built, err = c.buildLocked(t)
			} else {
				_, err = elastic.Build(t)
			}
			d.problems = problemsOf(err)
		}
		if t == chosen && ref != lc.inForce && d.problems == "" {
			if built == nil {
				var err error
				if built, err = c.buildLocked(t); err != nil {
					d.problems = problemsOf(err)
				}
			}
			if built != nil {
				c.setTreeLocked(logger, built)
				lc.inForce = ref
				logger.Info("ElasticQuotaTree in force", "tree", klog.KObj(t), "generation", t.Generation)
				events = append(events, treeEvent{t, "Normal", eventReasonEnforced, fmt.Sprintf("generation %d is in force", t.Generation)})
			}
		}
		if d.problems != "" && !lc.announced[ref] {
			lc.announced[ref] = true
			logger.Info("Invalid ElasticQuotaTree", "tree", klog.KObj(t), "generation", t.Generation, "problems", d.problems)
			events = append(events, treeEvent{t, "Warning", eventReasonInvalid, d.problems})
		}
		d.active = activeCondition(t, chosen, d, lc.inForce, c.tree != nil)
		decisions[key] = d
	}
	if chosen == nil && c.tree != nil {
		logger.Info("No ElasticQuotaTree in kube-system; quota is no longer enforced")
		c.setTreeLocked(logger, nil)
		lc.inForce = generationRef{}
	}
	lc.decisions = decisions
	c.changed = true
	return events
}

// buildLocked builds t, re-charging the pods of the tree in force when there is
// one.
func (c *quotaCache) buildLocked(t *schedulingv1beta1.ElasticQuotaTree) (*elastic.Tree, error) {
	if c.tree != nil {
		return c.tree.Rebuild(t)
	}
	return elastic.Build(t)
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

func activeCondition(t, chosen *schedulingv1beta1.ElasticQuotaTree, d treeDecision, inForce generationRef, haveTree bool) metav1.Condition {
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
	case haveTree && inForce.uid == t.UID:
		cond.Status = metav1.ConditionTrue
		cond.Reason = schedulingv1beta1.ReasonInvalid
		cond.Message = fmt.Sprintf("generation %d is invalid; generation %d stays in force", t.Generation, inForce.generation)
	case haveTree:
		cond.Reason = schedulingv1beta1.ReasonInvalid
		cond.Message = "this tree is invalid; the last valid tree stays in force"
	default:
		cond.Reason = schedulingv1beta1.ReasonInvalid
		cond.Message = "this tree is invalid and no valid tree was seen; no quota is enforced"
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
