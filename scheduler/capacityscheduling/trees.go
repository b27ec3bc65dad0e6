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
// one if there are several; an invalid generation leaves the last valid
// generation of that object in force (elastic.LastValid).
type treeLifecycle struct {
	// inForce is the object and generation the tree in force was built from.
	inForce generationRef
	// inForceSpec is that generation's spec, which status.lastValid records.
	inForceSpec *schedulingv1beta1.ElasticQuotaTreeSpec
	// decided is the generation of the chosen tree the last sync decided about;
	// a sync for the same generation (a status write, say) decides nothing anew.
	decided generationRef
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
	switch {
	case chosen != nil:
		events = c.enforceLocked(logger, chosen)
	case c.tree != nil:
		logger.Info("No ElasticQuotaTree in kube-system; quota is no longer enforced")
		c.setInForceLocked(logger, nil, generationRef{}, nil)
		fallthrough
	default:
		lc.decided = generationRef{}
	}

	decisions := make(map[string]treeDecision, len(trees))
	for _, t := range trees {
		key := t.Namespace + "/" + t.Name
		ref := generationRef{uid: t.UID, generation: t.Generation}
		d, known := lc.decisions[key]
		if !known || d.ref != ref {
			_, err := elastic.Build(t)
			d = treeDecision{ref: ref, problems: problemsOf(err)}
		}
		if d.problems != "" && !lc.announced[ref] {
			lc.announced[ref] = true
			logger.Info("Invalid ElasticQuotaTree", "tree", klog.KObj(t), "generation", t.Generation, "problems", d.problems)
			events = append(events, treeEvent{t, "Warning", eventReasonInvalid, d.problems})
		}
		d.active = activeCondition(t, chosen, d, lc.inForce)
		decisions[key] = d
	}
	lc.decisions = decisions
	c.changed = true
	return events
}

// enforceLocked puts the generation of chosen that elastic.LastValid picks in
// force, re-charging the pods of the tree it replaces.
func (c *quotaCache) enforceLocked(logger klog.Logger, chosen *schedulingv1beta1.ElasticQuotaTree) []treeEvent {
	lc := &c.lifecycle
	seen := generationRef{uid: chosen.UID, generation: chosen.Generation}
	if seen == lc.decided {
		return nil
	}
	lc.decided = seen
	var remembered *schedulingv1beta1.TreeGeneration
	if lc.inForce.uid == chosen.UID && lc.inForceSpec != nil {
		remembered = &schedulingv1beta1.TreeGeneration{Generation: lc.inForce.generation, Spec: *lc.inForceSpec}
	}
	enforced, _ := elastic.LastValid(chosen, remembered)
	if enforced.Tree == nil {
		if c.tree != nil {
			logger.Info("The ElasticQuotaTree in force has no valid generation; quota is no longer enforced", "tree", klog.KObj(chosen))
			c.setInForceLocked(logger, nil, generationRef{}, nil)
		}
		return nil
	}
	ref := generationRef{uid: chosen.UID, generation: enforced.Generation}
	if ref == lc.inForce {
		return nil
	}
	if c.tree != nil {
		enforced.Tree.ChargeFrom(c.tree)
	}
	c.setInForceLocked(logger, enforced.Tree, ref, enforced.Spec)
	logger.Info("ElasticQuotaTree in force", "tree", klog.KObj(chosen), "generation", enforced.Generation, "current", enforced.Current)
	return []treeEvent{{chosen, "Normal", eventReasonEnforced, fmt.Sprintf("generation %d is in force", enforced.Generation)}}
}

func (c *quotaCache) setInForceLocked(logger klog.Logger, t *elastic.Tree, ref generationRef, spec *schedulingv1beta1.ElasticQuotaTreeSpec) {
	c.setTreeLocked(logger, t)
	c.lifecycle.inForce, c.lifecycle.inForceSpec = ref, spec
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

func activeCondition(t, chosen *schedulingv1beta1.ElasticQuotaTree, d treeDecision, inForce generationRef) metav1.Condition {
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
	case inForce.uid == t.UID:
		cond.Status = metav1.ConditionTrue
		cond.Reason = schedulingv1beta1.ReasonInvalid
		cond.Message = fmt.Sprintf("generation %d is invalid; generation %d stays in force", t.Generation, inForce.generation)
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
