package capacityscheduling

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// quotaPreemption is DefaultPreemption for a pod its quota admitted but no node
// has room for. It is upstream's plugin with one change: the victims it may
// consider. Lower-priority pods of the preemptor's own leaf, and of no leaf at
// all, are fair game as they are for DefaultPreemption; a pod of another owner
// only while its eviction leaves that owner at or above its min
// (elastic.Tree.KeepsGuarantees). Which of those it evicts, PodDisruptionBudgets,
// nominated pods, node choice and eligibility are DefaultPreemption's own.
type quotaPreemption struct {
	*defaultpreemption.DefaultPreemption
	plugin *Plugin
}

var _ preemption.Interface = &quotaPreemption{}

// SelectVictimsOnNode runs DefaultPreemption's victim search over the
// candidates that may go one by one. Several of one owner may together take it
// below its min; then the search runs again over the pods that touch no other
// owner's guarantee at all.
func (q *quotaPreemption) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo,
	candidates []*preemption.DomainVictim, pdbs []*policyv1.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	var each, free []*preemption.DomainVictim
	for _, v := range candidates {
		uids := victimUIDs(v)
		switch {
		case q.plugin.cache.chargedWithin(preemptor.Namespace, uids):
			free = append(free, v)
			each = append(each, v)
		case q.plugin.cache.keepsGuarantees(preemptor.Namespace, uids):
			each = append(each, v)
		}
	}
	if len(each) > len(free) {
		// The dry run mutates the node and the state it is given: try on copies.
		victims, violations, status := q.DefaultPreemption.SelectVictimsOnNode(ctx, state.Clone(), preemptor, nodeInfo.Snapshot(), each, pdbs)
		if status.IsSuccess() && q.plugin.cache.keepsGuarantees(preemptor.Namespace, podUIDs(victims)) {
			return victims, violations, status
		}
	}
	return q.DefaultPreemption.SelectVictimsOnNode(ctx, state, preemptor, nodeInfo, free, pdbs)
}

func victimUIDs(v *preemption.DomainVictim) []types.UID {
	pods := v.Pods()
	uids := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		uids = append(uids, p.GetPod().UID)
	}
	return uids
}

func podUIDs(pods []*corev1.Pod) []types.UID {
	uids := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		uids = append(uids, p.UID)
	}
	return uids
}
