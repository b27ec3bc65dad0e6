package capacityscheduling

import (
	"errors"
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"
)

// A pod group's scheduling cycle can fail without any of its pods getting
// through PreFilter: with no node in the snapshot kube-scheduler rejects each
// pod before PreFilter (as unresolvable), and a PreFilter plugin can reject a
// pod as unresolvable before the later ones run. For a single pod either is
// unresolvable and no PostFilter runs. For a pod group kube-scheduler v1.37
// still runs the PodGroupPostFilter plugins, and DynamicResources' then fails
// the cycle with an error, reading the state its PreFilter never wrote, so
// the pods are never marked unschedulable and no autoscaler sees them. The
// configuration enables this plugin at PodGroupPostFilter by name, which puts
// it before DynamicResources there: when no pod of the cycle reached its
// PreFilter (which runs after DynamicResources' in the default order), it
// answers unresolvable, as a single pod's cycle would be, and the plugins
// after it do not run.

// podGroupReachedKey marks, in a pod group's cycle state, that a pod of the
// cycle reached this plugin's PreFilter.
const podGroupReachedKey fwk.StateKey = Name + "/pod-group-reached-prefilter"

type podGroupReached struct{}

func (podGroupReached) Clone() fwk.StateData { return podGroupReached{} }

// markPodGroupReached records, for a pod scheduled in a pod group's cycle,
// that the cycle got as far as this plugin's PreFilter.
func markPodGroupReached(state fwk.CycleState) {
	if pg := state.GetPodGroupSchedulingCycle(); pg != nil {
		pg.Write(podGroupReachedKey, podGroupReached{})
	}
}

// inPodGroupCycle says that state is a pod's within a pod group's scheduling
// cycle, whose reservations are tentative: kube-scheduler reverts them all
// once the group is placed (or fails), and reserves the placed pods again, in
// a state of their own, for binding.
func inPodGroupCycle(state fwk.CycleState) bool {
	return state != nil && state.GetPodGroupSchedulingCycle() != nil
}

// unresolvedBeforePreFilter is the status of a pod group cycle in which no
// pod reached this plugin's PreFilter, or nil when one did.
func unresolvedBeforePreFilter(state fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo) *fwk.Status {
	if state == nil {
		return nil
	}
	if _, err := state.Read(podGroupReachedKey); !errors.Is(err, fwk.ErrNotFound) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("no pod of pod group %s/%s got through PreFilter: no preemption can help", pgInfo.GetNamespace(), pgInfo.GetName()))
}
