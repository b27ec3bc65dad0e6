package simulator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// placementAware are the in-tree PreFilter plugins whose state depends on the
// pods already on nodes, and which keep it current through the AddPod
// extension: inter-pod (anti-)affinity, topology spreading and ReadWriteOncePod
// volumes.
var placementAware = []string{names.InterPodAffinity, names.PodTopologySpread, names.VolumeRestrictions}

// PodCheck is one pod's PreFilter run, reusable for every node it is checked
// against: PreFilter is per pod, Filter per node. As the simulation places pods,
// Placed keeps the PreFilter state as if PreFilter ran again, the way the
// scheduler accounts for nominated pods; so a pod's anti-affinity or spread
// constraint sees the pods placed before it in the same simulation.
type PodCheck struct {
	fw     *profile
	pod    *corev1.Pod
	state  fwk.CycleState
	status *fwk.Status
	// tracks: some placement-aware plugin ran (was not skipped), so placed pods
	// must be added to its state.
	tracks bool
	// affinitySkipped: InterPodAffinity skipped this pod, which has no affinity
	// terms of its own and saw no pod with required anti-affinity. A placed
	// pod with required anti-affinity changes that, and PreFilter runs again.
	affinitySkipped bool
	// monotone: placing pods can only turn this pod away from more nodes, never
	// let it onto one that refused it (no required pod affinity, no hard
	// spread constraint).
	monotone bool
	// namespaceLocal: the pod's required affinity terms select pods of its own
	// namespace only.
	namespaceLocal bool
	// shared: state is also another PodCheck's (see Fork), so it is copied
	// before it changes.
	shared bool
	// shapeOnly: every Filter plugin that runs for the pod reads only the
	// node's shape (NodeShape).
	shapeOnly bool
	// dra: the DynamicResources plugin took part in PreFilter (the pod has
	// claims, or asks for an extended resource devices may serve), whose
	// allocator holds the devices and allocations of the snapshot's DRA
	// state at draStamp. A check whose stamp is not the snapshot's runs
	// PreFilter again before it filters: a node with devices was added, a
	// placed pod took devices, or a Revert gave them back.
	dra      bool
	draStamp uint64
}

// PreFilter runs the PreFilter plugins for pod against the current snapshot.
func (f *Framework) PreFilter(ctx context.Context, pod *corev1.Pod) *PodCheck {
	c := &PodCheck{fw: f.profileFor(pod), pod: pod}
	c.preFilter(ctx)
	return c
}

func (c *PodCheck) preFilter(ctx context.Context) {
	c.draStamp = c.fw.snapshot.current.DRAStamp()
	state := framework.NewCycleState()
	_, status, _ := c.fw.RunPreFilterPlugins(c.fw.pluginContext(ctx), state, c.pod)
	if status.IsSkip() {
		status = nil
	}
	c.state, c.status, c.shared = state, status, false
	skipped := state.GetSkipFilterPlugins()
	c.tracks, c.affinitySkipped = false, false
	for _, name := range c.fw.placementAware {
		if !skipped.Has(name) {
			c.tracks = true
		}
	}
	c.affinitySkipped = c.fw.enabledPreFilter.Has(names.InterPodAffinity) && skipped.Has(names.InterPodAffinity)
	c.dra = c.fw.dra != nil && c.fw.enabledPreFilter.Has(names.DynamicResources) && !skipped.Has(names.DynamicResources)
	a := c.pod.Spec.Affinity
	requiredAffinity := a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
	c.namespaceLocal = namespaceLocal(c.pod)
	c.shapeOnly = shapeOnly(c.fw.filters, skipped, c.pod)
	c.monotone = !requiredAffinity && (skipped.Has(names.PodTopologySpread) || !c.fw.enabledPreFilter.Has(names.PodTopologySpread))
}

// ShapeOnly reports whether the check passes or refuses a node by its
// NodeShape alone, so that nodes of one shape, whatever their names and
// labels, take the pod alike, and take it alike after the same placements.
func (c *PodCheck) ShapeOnly() bool { return c.shapeOnly }

// Monotone reports whether a node that refused the pod refuses it for good in
// this simulation, which only adds pods.
func (c *PodCheck) Monotone() bool { return c.monotone }

// Fits runs the Filter plugins for the pod on info. A PreFilter refusal refuses
// every node.
func (c *PodCheck) Fits(ctx context.Context, info fwk.NodeInfo) *fwk.Status {
	if c.dra && c.draStamp != c.fw.snapshot.current.DRAStamp() {
		c.preFilter(ctx)
	}
	if !c.status.IsSuccess() {
		return c.status
	}
	return c.fw.RunFilterPlugins(c.fw.pluginContext(ctx), c.state, c.pod, info)
}

// Reserve allocates the claims of pod, which the simulation placed on node
// after Fits passed it there, in the snapshot's DRA state, so that later
// checks see the devices taken; a claim allocated already (one the pod shares
// with a pod placed before) stays as it is. It runs the DynamicResources
// plugin's PreFilter, Filter and Reserve for pod on node alone, in a cycle
// state of their own: the check's state may be another check's too (the
// plugin's part of it is shared by every fork), and Reserve writes into it.
func (c *PodCheck) Reserve(ctx context.Context, pod *corev1.Pod, node fwk.NodeInfo) error {
	if !c.dra {
		return nil
	}
	ctx = c.fw.pluginContext(ctx)
	state := framework.NewCycleState()
	_, status := c.fw.dra.PreFilter(ctx, state, pod, nil)
	if status.IsSkip() {
		return nil
	}
	if status.IsSuccess() {
		status = c.fw.dra.Filter(ctx, state, pod, node)
	}
	if status.IsSuccess() {
		status = c.fw.dra.Reserve(ctx, state, pod, node.Node().Name)
	}
	if !status.IsSuccess() {
		return fmt.Errorf("allocating the claims of pod %s/%s on node %s: %w", pod.Namespace, pod.Name, node.Node().Name, status.AsError())
	}
	return nil
}

// Placed tells the check that the simulation put placed on node (which already
// holds it).
func (c *PodCheck) Placed(ctx context.Context, placed fwk.PodInfo, node fwk.NodeInfo) {
	if !c.status.IsSuccess() {
		return
	}
	// Spreading and volumes count pods of the pod's own namespace only, and
	// affinity terms do unless they name other namespaces: most placements
	// concern few checks.
	if p := placed.GetPod(); p.Namespace != c.pod.Namespace && c.namespaceLocal && namespaceLocal(p) {
		return
	}
	if c.affinitySkipped && len(placed.GetRequiredAntiAffinityTerms()) > 0 {
		c.preFilter(ctx)
		return
	}
	if !c.tracks {
		return
	}
	if c.shared {
		c.state, c.shared = c.state.Clone(), false
	}
	if st := c.fw.RunPreFilterExtensionAddPod(c.fw.pluginContext(ctx), c.state, c.pod, placed, node); !st.IsSuccess() {
		c.status = st
	}
}

// FollowsPlacements reports whether placing pods can change the check;
// antiAffinity says whether any of them has required anti-affinity terms. A
// check that does not follow them stays as it is for good (Placed keeps no
// refused state and tracks nothing for it), so callers that place many pods
// may leave it out and save a call per placement.
func (c *PodCheck) FollowsPlacements(antiAffinity bool) bool {
	return c.status.IsSuccess() && (c.tracks || c.affinitySkipped && antiAffinity)
}

// Fork returns a copy whose later Placed calls leave c as it is: estimating
// for one node group must not change what the next one starts from.
func (c *PodCheck) Fork() *PodCheck {
	cp := *c
	cp.shared, c.shared = true, true
	return &cp
}

// Pod is the pod checked.
func (c *PodCheck) Pod() *corev1.Pod { return c.pod }

// PreFilterStatus is the PreFilter outcome; nil is success.
func (c *PodCheck) PreFilterStatus() *fwk.Status { return c.status }

// namespaceLocal reports whether every required (anti-)affinity term of pod
// selects pods of its own namespace only, as a term without namespaces and
// without a namespace selector does.
func namespaceLocal(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return true
	}
	local := func(terms []corev1.PodAffinityTerm) bool {
		for _, t := range terms {
			if t.NamespaceSelector != nil {
				return false
			}
			for _, ns := range t.Namespaces {
				if ns != pod.Namespace {
					return false
				}
			}
		}
		return true
	}
	return (a.PodAffinity == nil || local(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)) &&
		(a.PodAntiAffinity == nil || local(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
}
