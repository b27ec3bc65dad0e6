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

// The scheduler's CapacityScheduling admits a gang whole: the first of its
// pods asks for what the gang still needs (gang.Outstanding), and the gang
// runs whole or not at all. So a gang the tree will not admit gets no node
// for any of its pods, and a gang it admits is charged once, for all of them.

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
// what the gang still needs (its members' devices counted as ps counts a
// pod's), and returns the decision for every later one.
// It reports false for a pod to be judged alone.
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
	return d, !d.alone
}

func (ga *gangAdmission) decide(scratch *elastic.Scratch, ps *pass, k gang.Key, pod *corev1.Pod) *gangDecision {
	g, isGang, err := gang.Of(pod, ga.podGroups)
	if err != nil || !isGang {
		// A gang that cannot be read is refused by the autoscaler's
		// loop, with the reason; here its pods are judged as pods.
		return &gangDecision{alone: true}
	}
	named := sets.New[types.UID]()
	request, _, ok := gang.Outstanding(g, ga.members[k], elastic.Charged, pod, ps.gangCharger(named))
	if !ok {
		return &gangDecision{gang: g, alone: true}
	}
	verdict := scratch.Add(pod.Namespace, request)
	if verdict.Admitted() {
		// The gang charged its shared claims: pods after it that name
		// them too do not ask for them again.
		ps.held.Insert(named.UnsortedList()...)
		return &gangDecision{gang: g}
	}
	return &gangDecision{gang: g, refusal: &processors.Reason{
		MessageID:  processors.MessagePodRefused,
		Parameters: []string{verdict.Reason(), verdict.Message()},
		Message:    verdict.Reason(),
	}}
}
