package capacityscheduling

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/quota/gang"
)

// A Workload API PodGroup's pods are scheduled in one pod group cycle, which
// runs PodGroupPostFilter instead of PostFilter. Reclaim for such a gang is
// the pod path's reclaim (the library's plan for the gang's whole outstanding
// request, carried out by the scheduler's preemption evaluator), with one
// step more: before anything is evicted, the pod group is placed as if the
// victims were gone, with the pod group scheduling function kube-scheduler
// hands to PodGroupPostFilter. Victims are evicted only when that placement
// puts the whole gang on nodes; the evaluator then runs for one member with
// the cycle state the placement computed for it.

// reclaimTrial is a gang placed as if a reclaim's victims were gone: while it
// is set, the gang's members are admitted against Tree.Without(victims). The
// placement reserves each member and reverts them all, as a pod group cycle
// does; none of that may charge the tree, end a hold or requeue anyone, so
// its Reserve only notes the member and its Unreserve only forgets it.
type reclaimTrial struct {
	gang     gang.Key
	victims  []types.UID
	reserved sets.Set[types.UID]
}

// covers says whether gang key is on trial.
func (t *reclaimTrial) covers(key gang.Key) bool { return t != nil && t.gang == key }

// reserve notes pod as reserved by the trial when its gang is on trial.
func (t *reclaimTrial) reserve(pod *corev1.Pod) bool {
	key, ok := gang.RefOf(pod)
	if !ok || !t.covers(key) {
		return false
	}
	t.reserved.Insert(pod.UID)
	return true
}

// unreserve forgets a pod the trial reserved, and says whether it was one.
func (t *reclaimTrial) unreserve(uid types.UID) bool {
	if t == nil || !t.reserved.Has(uid) {
		return false
	}
	t.reserved.Delete(uid)
	return true
}

// reclaimForPodGroup reclaims quota for a gang of a Workload API PodGroup its
// quota refused. It returns a nil result and the reason when it evicts
// nobody: the gang's request cannot fit even with every allowed victim gone,
// an earlier reclaim is still in flight, or the gang would not fit the nodes
// once the victims are gone.
func (p *Plugin) reclaimForPodGroup(ctx context.Context, key gang.Key, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	pods := pgInfo.GetUnscheduledPods()
	if len(pods) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the pod group has no pod to schedule")
	}
	// The gang asks as its first pending member asks at PreFilter.
	first := pods[0]
	c := p.cache
	c.mu.Lock()
	if c.tree == nil {
		c.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: no ElasticQuotaTree in force")
	}
	leaf, _ := c.tree.LeafFor(key.Namespace)
	g, isGang, err := gang.Of(first, c.podGroup)
	var whole corev1.ResourceList
	reserved := c.reservations[key] != nil
	if err == nil && isGang && !reserved {
		whole = c.gangRequestLocked(g, first)
	}
	never := whole != nil && !c.tree.AdmitAlone(key.Namespace, whole).Admitted()
	c.mu.Unlock()
	switch {
	case err != nil:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: "+err.Error())
	case reserved:
		// Part of the gang is being bound: its reservation holds the rest.
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the gang's reservation holds its quota")
	case whole == nil:
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the gang asks its quota for nothing more")
	case never:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: the gang exceeds a max of its quota")
	}
	plan, status := p.planEligibleReclaim(ctx, first, whole)
	if !status.IsSuccess() {
		return nil, status
	}
	assignments, status := p.placeWithout(ctx, key, plan.victims, schedule)
	if !status.IsSuccess() {
		p.cache.metrics.reclaim(leaf.Name(), reclaimFailed)
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the gang would not fit the nodes even once its victims are gone: "+status.Message())
	}
	// The evaluator runs for the first member placed, with the state its
	// placement computed: every plugin's PreFilter has run for it there.
	var preemptor fwk.ProposedAssignment
	for _, a := range assignments.ProposedAssignments {
		if a.GetNodeName() != "" {
			preemptor = a
			break
		}
	}
	if preemptor == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: the gang's trial placement placed no pod")
	}
	state := preemptor.GetCycleState()
	s, err := readState(state)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("reclaim for gang %s: %w", key, err))
	}
	result, status := p.runReclaim(ctx, state, s, preemptor.GetPod(), leaf.Name(), whole, plan, framework.NewDefaultNodeToStatus())
	if !status.IsSuccess() {
		return nil, prefixed("reclaim: ", status)
	}
	// Every member is nominated where the trial placed it, the preemptor
	// where the evaluator chose, so that the room stays theirs.
	nominations := make(map[types.NamespacedName]*fwk.NominatingInfo, len(assignments.ProposedAssignments))
	for _, a := range assignments.ProposedAssignments {
		if a.GetNodeName() == "" {
			continue
		}
		pod := a.GetPod()
		nominations[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: a.GetNodeName()}
	}
	if result != nil && result.NominatingInfo != nil {
		pod := preemptor.GetPod()
		nominations[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = result.NominatingInfo
	}
	klog.FromContext(ctx).V(2).Info("Reclaiming quota for a gang", "gang", key, "leaf", leaf.Name(), "victims", len(plan.victims))
	return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations}, prefixed("reclaim: ", status)
}

// placeWithout runs the pod group scheduling function with the victims taken
// out of the scheduler's snapshot and, for gang key, out of quota usage. The
// snapshot is restored, and the trial ended, before it returns.
func (p *Plugin) placeWithout(ctx context.Context, key gang.Key, victims []*corev1.Pod, schedule fwk.PodGroupSchedulingFunc) (_ *fwk.PodGroupAssignments, status *fwk.Status) {
	logger := klog.FromContext(ctx)
	snapshot := p.handle.MutableSnapshotSharedLister()
	if err := snapshot.StartMutations(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("reclaim for gang %s: starting snapshot mutations: %w", key, err))
	}
	defer func() {
		if err := snapshot.EndMutations(); err != nil {
			status = fwk.AsStatus(fmt.Errorf("reclaim for gang %s: ending snapshot mutations: %w", key, err))
		}
	}()
	uids := make([]types.UID, 0, len(victims))
	for _, v := range victims {
		uids = append(uids, v.UID)
		if v.Spec.NodeName == "" {
			continue
		}
		if err := snapshot.RemovePod(logger, v, v.Spec.NodeName); err != nil {
			// The victim left the snapshot: it takes no node room.
			logger.V(4).Info("A reclaim victim is not in the snapshot", "pod", klog.KObj(v), "err", err)
		}
	}
	p.cache.mu.Lock()
	p.cache.trial = &reclaimTrial{gang: key, victims: uids, reserved: sets.New[types.UID]()}
	p.cache.mu.Unlock()
	defer func() {
		p.cache.mu.Lock()
		p.cache.trial = nil
		p.cache.mu.Unlock()
	}()
	assignments, status := schedule(ctx)
	if status.IsSuccess() && assignments == nil {
		return nil, fwk.AsStatus(errors.New("the pod group scheduling function returned no assignments"))
	}
	return assignments, status
}
