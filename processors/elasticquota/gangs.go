package elasticquota

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
)

// The scheduler's CapacityScheduling admits a gang for its first MinCount
// members, together: the first of its pods to reach PreFilter asks for what
// that unit still needs (gang.Outstanding), and the unit runs whole or not at
// all. Each member past the
// unit is judged alone, like a pod of no gang, once the gang is admitted. So
// a gang the tree will not admit gets no node for any of its pods, a gang it
// admits is charged once for its unit, and a member past the unit gets a node
// only if the leaf has room for it after the unit's charge.

// gangAdmission decides the gangs of one loop's pending pods.
type gangAdmission struct {
	podGroups func(namespace, name string) (*schedulingv1beta1.PodGroup, bool)
	// members are the live pods of each gang with a pending pod.
	members map[gang.Key][]*corev1.Pod
	decided map[gang.Key]*gangDecision
}

// gangDecision is the verdict on one gang, which all its pending pods share.
type gangDecision struct {
	gang gang.Gang
	// alone says the gang's pods are judged one by one: a PodGroup of the
	// basic policy, a gang that cannot be read, or one whose minimum holds
	// its quota already.
	alone bool
	// refusal is why the tree will not admit the gang; nil when it does.
	refusal *processors.Reason
	// unit are the pods the gang is admitted for as one
	// (gang.SplitMembers); its other pods are judged alone once it is
	// admitted.
	unit sets.Set[types.UID]
}

// judgedAlone says whether pod, of the gang decided, is judged as a pod of
// no gang: every pod of a gang judged alone, and a member past the unit of a
// gang the tree admits. While the gang is refused, so is each of its pods:
// the scheduler admits none of them before the gang.
func (d *gangDecision) judgedAlone(pod *corev1.Pod) bool {
	return d.alone || (d.refusal == nil && !d.unit.Has(pod.UID))
}

func newGangAdmission(podGroups func(namespace, name string) (*schedulingv1beta1.PodGroup, bool), all, pending []*corev1.Pod) *gangAdmission {
	ga := &gangAdmission{podGroups: podGroups, decided: map[gang.Key]*gangDecision{}}
	for _, p := range pending {
		if k, ok := gang.RefOf(p); ok {
			if ga.members == nil {
				ga.members = map[gang.Key][]*corev1.Pod{}
			}
			ga.members[k] = nil
		}
	}
	if ga.members == nil {
		return ga
	}
	for _, p := range all {
		if k, ok := gang.RefOf(p); ok {
			if _, wanted := ga.members[k]; wanted {
				ga.members[k] = append(ga.members[k], p)
			}
		}
	}
	for k, pods := range ga.members {
		ga.members[k] = gang.Members(k, pods)
	}
	return ga
}

// admit decides pod's gang on its first pending pod, charging scratch with
// what the gang's unit still needs (its members' devices counted as ps counts
// a pod's), and returns the decision for every later one. It reports false
// for a pod to be judged alone, which the caller does after the unit's
// charge.
func (ga *gangAdmission) admit(scratch *elastic.Scratch, ps *pass, pod *corev1.Pod) (*gangDecision, bool) {
	k, ok := gang.RefOf(pod)
	if !ok {
		return nil, false
	}
	d := ga.decided[k]
	if d == nil {
		d = ga.decide(scratch, ps, k, pod)
		ga.decided[k] = d
	}
	return d, !d.judgedAlone(pod)
}

func (ga *gangAdmission) decide(scratch *elastic.Scratch, ps *pass, k gang.Key, pod *corev1.Pod) *gangDecision {
	g, isGang, err := gang.Of(pod, ga.podGroups)
	if err != nil || !isGang {
		// A gang that cannot be read is refused by the autoscaler's
		// loop, with the reason; here its pods are judged as pods.
		return &gangDecision{alone: true}
	}
	split := gang.SplitMembers(g, ga.members[k], elastic.Charged)
	if split.Whole() {
		return &gangDecision{gang: g, alone: true}
	}
	named := sets.New[types.UID]()
	request, _ := split.Request(k, pod, ps.gangCharger(named))
	unit := sets.New[types.UID]()
	for _, m := range split.Unit {
		unit.Insert(m.UID)
	}
	verdict := scratch.Add(pod.Namespace, request)
	if verdict.Admitted() {
		// The gang charged its shared claims: pods after it that name
		// them too do not ask for them again.
		ps.held.Insert(named.UnsortedList()...)
		return &gangDecision{gang: g, unit: unit}
	}
	return &gangDecision{gang: g, unit: unit, refusal: &processors.Reason{
		MessageID:  processors.MessagePodRefused,
		Parameters: []string{verdict.Reason(), verdict.Message()},
		Message:    verdict.Reason(),
	}}
}
