package capacityscheduling

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/quotascale/quotascale/quota/elastic"
)

// reclaimPlan is the library's choice of victims for one preemptor. It does not
// depend on the node the preemptor lands on: quota is cluster-wide.
type reclaimPlan struct {
	victims       []*corev1.Pod
	pdbViolations int
}

// planReclaim asks the library which charged pods to evict so the pod is
// admitted. Candidates are every charged pod that is not already terminating.
func (p *Plugin) planReclaim(ctx context.Context, pod *corev1.Pod, requests corev1.ResourceList) (*reclaimPlan, *fwk.Status) {
	pods, err := p.cache.podLister.List(labels.Everything())
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("listing pods for a reclaim: %w", err))
	}
	pdbs, err := p.handle.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister().List(labels.Everything())
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("listing PodDisruptionBudgets for a reclaim: %w", err))
	}
	byUID := make(map[types.UID]*corev1.Pod)
	var candidates []elastic.Candidate
	for _, c := range pods {
		if !elastic.Charged(c) || c.DeletionTimestamp != nil || c.UID == pod.UID {
			continue
		}
		byUID[c.UID] = c
		candidates = append(candidates, elastic.Candidate{
			UID:         c.UID,
			Priority:    corev1helpers.PodPriority(c),
			Created:     c.CreationTimestamp.Time,
			ViolatesPDB: violatesPDB(c, pdbs),
		})
	}
	p.cache.mu.Lock()
	tree := p.cache.tree
	var plan elastic.Plan
	ok := false
	if tree != nil {
		plan, ok = tree.PlanReclaim(elastic.Preemptor{Namespace: pod.Namespace, Requests: requests, Priority: corev1helpers.PodPriority(pod)}, candidates)
	}
	p.cache.mu.Unlock()
	switch {
	case !ok:
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: no quota node above its min can give back enough without going below its own min")
	case len(plan.Victims) == 0:
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: pods already being deleted free enough quota; waiting for them to be gone")
	}
	out := &reclaimPlan{}
	for _, uid := range plan.Victims {
		v := byUID[uid]
		out.victims = append(out.victims, v)
		if violatesPDB(v, pdbs) {
			out.pdbViolations++
		}
	}
	return out, nil
}

// planEligibleReclaim is planReclaim for a preemptor that may preempt now:
// it refuses, evicting nobody, while an earlier reclaim is in flight.
func (p *Plugin) planEligibleReclaim(ctx context.Context, pod *corev1.Pod, requests corev1.ResourceList) (*reclaimPlan, *fwk.Status) {
	plan, status := p.planReclaim(ctx, pod, requests)
	if !status.IsSuccess() {
		return nil, status
	}
	if ok, msg := p.PodEligibleToPreemptOthers(ctx, pod, nil); !ok {
		// Waiting for an earlier reclaim is not a failure of this one.
		return nil, fwk.NewStatus(fwk.Unschedulable, "reclaim: "+msg)
	}
	return plan, nil
}

// runReclaim carries a reclaim plan out with the scheduler's preemption
// evaluator: it picks a node the preemptor fits once the victims are gone,
// nominates the preemptor there and evicts the victims. state is the
// preemptor's cycle state, s this plugin's part of it. The quota the victims
// free is then held for the preemptor and its gang (startHold) for wanted,
// what the plan made room for.
func (p *Plugin) runReclaim(ctx context.Context, state fwk.CycleState, s *stateData, pod *corev1.Pod, leaf string, wanted corev1.ResourceList,
	plan *reclaimPlan, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s.plan = plan
	schedulermetrics.PreemptionAttempts.Inc()
	result, status := p.preemptRecording(state, func() (*fwk.PostFilterResult, *fwk.Status) {
		return p.reclaimer.Preempt(ctx, state, pod, quotaRefusedEverywhere{m})
	})
	if status.IsSuccess() && result != nil && result.NominatingInfo != nil && result.NominatedNodeName != "" {
		p.cache.startHold(pod, leaf, wanted, plan.victims)
		p.cache.metrics.reclaim(leaf, reclaimStarted)
	} else {
		// The leaf is owed its min and the victims are known, yet no node
		// takes the preemptor once they are gone, or the evictions failed.
		p.cache.metrics.reclaim(leaf, reclaimFailed)
	}
	return result, status
}

// violatesPDB reports whether evicting pod would break a PodDisruptionBudget that
// allows no more disruptions. It is a best-effort view: the budgets' status may
// lag, and the eviction itself is what enforces them.
func violatesPDB(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) bool {
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace || pdb.Status.DisruptionsAllowed > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			return true
		}
	}
	return false
}

// quotaRefusedEverywhere presents every node as a preemption candidate. PreFilter
// refused the pod as UnschedulableAndUnresolvable so that node-local preemption
// leaves quota alone; for a reclaim, every node is a place the pod may go.
type quotaRefusedEverywhere struct{ fwk.NodeToStatusReader }

func (q quotaRefusedEverywhere) NodesForStatusCode(lister fwk.NodeInfoLister, code fwk.Code) ([]fwk.NodeInfo, error) {
	if code != fwk.Unschedulable {
		return nil, nil
	}
	return lister.List()
}

// GetOffsetAndNumCandidates starts at the first node, so results are repeatable,
// and bounds the dry run: every node sees the same victims.
func (p *Plugin) GetOffsetAndNumCandidates(nodes int32) (int32, int32) {
	return 0, min(nodes, *p.args.MinCandidateNodesAbsolute)
}

// CandidatesToVictimsMap maps each candidate node to its victims.
func (p *Plugin) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	m := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		m[c.Name()] = c.Victims()
	}
	return m
}

// PodEligibleToPreemptOthers refuses a pod that does not preempt by policy, and
// any pod while an earlier reclaim is in flight. Victims still count in usage
// until they are gone, so a plan made meanwhile would see their quota nodes
// further above min than they are about to be, and could take one below its min.
// Reclaims are therefore one at a time; the deletion of the last victim requeues
// the waiting pods.
func (p *Plugin) PodEligibleToPreemptOthers(_ context.Context, pod *corev1.Pod, _ *fwk.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, "not eligible due to preemptionPolicy=Never."
	}
	if n := p.cache.reclaimsInFlight(); n > 0 {
		return false, fmt.Sprintf("not eligible: %d pod(s) evicted by an earlier reclaim are still terminating", n)
	}
	return true, ""
}

// SelectVictimsOnNode returns the reclaim plan's victims if, once they are gone,
// the pod fits on nodeInfo's node. Victims may run on other nodes: they free quota
// there, and node resources only here.
func (p *Plugin) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo,
	_ []*preemption.DomainVictim, _ []*policyv1.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	s, err := readState(state)
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	if s.plan == nil || len(s.plan.victims) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no reclaim plan")
	}
	logger := klog.FromContext(ctx)
	main := nodeInfo.Node().Name
	nodes := p.handle.SnapshotSharedLister().NodeInfos()
	for _, v := range s.plan.victims {
		info := nodeInfo
		if v.Spec.NodeName == main {
			if err := nodeInfo.RemovePod(logger, v); err != nil {
				return nil, 0, fwk.AsStatus(err)
			}
		} else if info, err = nodes.Get(v.Spec.NodeName); err != nil {
			// The victim's node left the snapshot; its pod frees quota all the same.
			continue
		}
		podInfo, err := framework.NewPodInfo(v)
		if err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if status := p.handle.RunPreFilterExtensionRemovePod(ctx, state, pod, podInfo, info); !status.IsSuccess() {
			return nil, 0, status
		}
	}
	if status := p.handle.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo); !status.IsSuccess() {
		return nil, 0, status
	}
	return s.plan.victims, s.plan.pdbViolations, nil
}

// OrderedScoreFuncs breaks ties by node name: every candidate has the same
// victims, and the default tie-break would pick at random.
func (p *Plugin) OrderedScoreFuncs(_ context.Context, nodesToVictims map[string]*extenderv1.Victims) []func(node string) int64 {
	names := make([]string, 0, len(nodesToVictims))
	for n := range nodesToVictims {
		names = append(names, n)
	}
	sort.Strings(names)
	rank := make(map[string]int64, len(names))
	for i, n := range names {
		rank[n] = -int64(i)
	}
	return []func(string) int64{func(node string) int64 { return rank[node] }}
}
