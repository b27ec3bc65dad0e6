package capacityscheduling

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// victimsKey is where a PostFilter keeps what its preemption dry run chose.
const victimsKey fwk.StateKey = Name + "/victims"

// chosenVictims are the victims the preemption dry run chose, by candidate
// node. The evaluator says only which node it nominated; the victims it is
// about to evict are that node's. They are marked leaving before the next
// scheduling cycle starts: the API shows their deletion only later, and a
// preemption planned meanwhile would count them as staying, so that two
// preemptions in a row could each take the same quota node down to its min.
type chosenVictims struct {
	mu     sync.Mutex
	byNode map[string][]*corev1.Pod
}

// Clone shares the record: the dry run tries every node on its own copy of
// the cycle state, and each must record here.
func (c *chosenVictims) Clone() fwk.StateData { return c }

func (c *chosenVictims) set(node string, victims []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byNode[node] = victims
}

func (c *chosenVictims) on(node string) []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byNode[node]
}

// recordingVictims records, in the cycle state, the victims every successful
// dry run on a node chose. Everything else is the wrapped preemption's.
type recordingVictims struct{ preemption.Interface }

func (r recordingVictims) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo,
	candidates []*preemption.DomainVictim, pdbs []*policyv1.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	victims, violations, status := r.Interface.SelectVictimsOnNode(ctx, state, pod, nodeInfo, candidates, pdbs)
	if status.IsSuccess() {
		if data, err := state.Read(victimsKey); err == nil {
			if chosen, ok := data.(*chosenVictims); ok {
				chosen.set(nodeInfo.Node().Name, victims)
			}
		}
	}
	return victims, violations, status
}

// preemptRecording runs a preemption and marks the victims of the node it
// nominated leaving in the tree in force.
func (p *Plugin) preemptRecording(state fwk.CycleState, preempt func() (*fwk.PostFilterResult, *fwk.Status)) (*fwk.PostFilterResult, *fwk.Status) {
	chosen := &chosenVictims{byNode: map[string][]*corev1.Pod{}}
	state.Write(victimsKey, chosen)
	result, status := preempt()
	if status.IsSuccess() && result != nil && result.NominatingInfo != nil && result.NominatedNodeName != "" {
		p.cache.markLeaving(chosen.on(result.NominatedNodeName))
	}
	return result, status
}
