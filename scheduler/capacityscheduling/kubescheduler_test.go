package capacityscheduling

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// kube-scheduler 1.37 never hands Reserve, Permit or the binding cycle the
// pod PreFilter saw: assume (pkg/scheduler/schedule_one.go) deep-copies it
// and sets its node first. A pod group's cycle (schedule_one_podgroup.go)
// runs each member's scheduling cycle and Reserve in a state within the
// group's cycle, reverts every reservation (Unreserve, last first), and, when
// the group is placed, reserves each placed member again for binding in its
// own state, outside the group's cycle. The scheduling function it hands to
// PodGroupPostFilter runs the same first pass and revert. The helpers below
// call the plugin in exactly these ways, so that no test passes only because
// it calls the plugin more kindly than the scheduler does.

// assumedOn is the pod kube-scheduler hands Reserve, Permit and the binding
// cycle: a deep copy of pod with its node set.
func assumedOn(pod *corev1.Pod, nodeName string) *corev1.Pod {
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = nodeName
	return assumed
}

// reserveAssumed runs the Reserve plugins for the assumed copy of pod.
func (h *harness) reserveAssumed(state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	return h.framework.RunReservePluginsReserve(h.ctx, state, assumedOn(pod, nodeName), nodeName)
}

// unreserveAssumed runs the Unreserve of the Reserve plugins for the assumed
// copy of pod.
func (h *harness) unreserveAssumed(state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	h.framework.RunReservePluginsUnreserve(h.ctx, state, assumedOn(pod, nodeName), nodeName)
}

// permitAssumed runs the plugin's Permit for the assumed copy of pod.
func (h *harness) permitAssumed(state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	status, _ := h.plugin.Permit(h.ctx, state, assumedOn(pod, nodeName), nodeName)
	return status
}

// placement is one member's outcome in a pod group's first pass.
type placement struct {
	pod   *corev1.Pod
	node  string
	state *framework.CycleState
	// status is the member's PreFilter or Reserve status; nil when it was
	// reserved.
	status *fwk.Status
}

func (p *placement) GetPod() *corev1.Pod { return p.pod }

func (p *placement) GetPodInfo() fwk.PodInfo {
	info, _ := framework.NewPodInfo(p.pod)
	return info
}

func (p *placement) GetNodeName() string {
	if p.status.IsSuccess() {
		return p.node
	}
	return ""
}

func (p *placement) GetCycleState() fwk.CycleState { return p.state }

// firstPass is the first pass of a pod group's cycle over members, on the
// nodes named by nodeOf (pod name to node; a pod named nowhere, or on "",
// fails its node fit): each member's PreFilter and, if it is placed, Reserve,
// in a state within the group's cycle pgState; then every reservation
// reverted, last first. It returns each member's placement.
func (h *harness) firstPass(pgState *framework.CycleState, members []*corev1.Pod, nodeOf map[string]string) []*placement {
	h.t.Helper()
	var out []*placement
	for _, pod := range members {
		state := framework.NewCycleState()
		state.SetPodGroupSchedulingCycle(pgState)
		pl := &placement{pod: pod, node: nodeOf[pod.Name], state: state}
		out = append(out, pl)
		_, pl.status, _ = h.framework.RunPreFilterPlugins(h.ctx, state, pod)
		if pl.status.Code() == fwk.Skip {
			pl.status = nil
		}
		if !pl.status.IsSuccess() {
			continue
		}
		if pl.node == "" {
			pl.status = fwk.NewStatus(fwk.Unschedulable, "node(s) didn't fit")
			continue
		}
		pl.status = h.reserveAssumed(state, pod, pl.node)
	}
	for i := len(out) - 1; i >= 0; i-- {
		if pl := out[i]; pl.status.IsSuccess() {
			h.unreserveAssumed(pl.state, pl.pod, pl.node)
		}
	}
	return out
}

// podGroupCycle runs a pod group's cycle as kube-scheduler's default pod
// group algorithm does: the first pass, and, when at least need members were
// placed, the binding pass, which reserves each placed member again in its
// own state, outside the group's cycle, and runs its Permit. It returns the
// placements; the binding pass's statuses replace the first pass's.
func (h *harness) podGroupCycle(members []*corev1.Pod, nodeOf map[string]string, need int) []*placement {
	h.t.Helper()
	placements := h.firstPass(framework.NewCycleState(), members, nodeOf)
	placed := 0
	for _, pl := range placements {
		if pl.status.IsSuccess() {
			placed++
		}
	}
	if placed < need {
		return placements
	}
	for _, pl := range placements {
		if !pl.status.IsSuccess() {
			continue
		}
		pl.state.SetPodGroupSchedulingCycle(nil)
		if pl.status = h.reserveAssumed(pl.state, pl.pod, pl.node); pl.status.IsSuccess() {
			if permit := h.permitAssumed(pl.state, pl.pod, pl.node); !permit.IsSuccess() && !permit.IsWait() {
				pl.status = permit
			}
		}
	}
	return placements
}

// podGroupSchedulingFunc is the function kube-scheduler hands
// PodGroupPostFilter: the first pass of the group's cycle in a new state,
// its placements as proposed assignments, and whether at least need members
// were placed.
func (h *harness) podGroupSchedulingFunc(members []*corev1.Pod, nodeOf map[string]string, need int) fwk.PodGroupSchedulingFunc {
	return func(context.Context) (*fwk.PodGroupAssignments, *fwk.Status) {
		placements := h.firstPass(framework.NewCycleState(), members, nodeOf)
		assignments := &fwk.PodGroupAssignments{}
		placed := 0
		for _, pl := range placements {
			assignments.ProposedAssignments = append(assignments.ProposedAssignments, pl)
			if pl.status.IsSuccess() {
				placed++
			}
		}
		if placed < need {
			return assignments, fwk.NewStatus(fwk.Unschedulable, "the pod group does not fit")
		}
		return assignments, nil
	}
}

// podGroupInfo is what kube-scheduler hands PodGroupPostFilter for pg, whose
// members are unscheduled.
func podGroupInfo(pg *schedulingapi.PodGroup, members []*corev1.Pod) *framework.PodGroupInfo {
	return &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: fwk.PodGroupKeyType, UnscheduledPods: members, PodGroup: pg}
}

// workloadGang is a Workload API PodGroup of the gang policy with minCount,
// and n pending pods of namespace naming it, each asking cpu, the first the
// oldest.
func workloadGang(namespace, name string, minCount int32, n int, cpu string) (*schedulingapi.PodGroup, []*corev1.Pod) {
	pg := &schedulingapi.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("podgroup-" + name)}}
	pg.Spec.SchedulingPolicy.Gang = &schedulingapi.GangSchedulingPolicy{MinCount: minCount}
	pods := ackGang(namespace, name, "1", n, cpu)
	for _, p := range pods {
		p.Labels = nil
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &pg.Name}
	}
	return pg, pods
}
