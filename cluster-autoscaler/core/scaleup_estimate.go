package core

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/estimator"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/processors"
)

// scaleUpRound is one scale-up's working state: the pending pod groups, what
// each node group said of them, and which of them each node group takes.
type scaleUpRound struct {
	lc       *processors.LoopContext
	state    *clusterstate.State
	health   *clusterstate.Health
	groups   []*podGroup
	snapshot *simulator.Snapshot
	// info says, per pod group, which node groups rejected or skipped it.
	info []processors.NoScaleUpInfo
	// prepared are each pod group's pods ready for estimation: estimation
	// sees the same pods for every node group, so they are prepared once.
	prepared [][]estimator.Pod
	// takes are the pod groups each node group's template takes: groups are
	// balanced only with groups that take the same ones, as upstream's.
	takes map[string][]int
	// estimates are the round's reusable estimates (estimate_reuse.go);
	// reused counts the node groups they served without estimating.
	estimates map[estimateKey]estimator.Result
	reused    int
	// hostScoped caches snapshot.HostScopedAntiAffinity: every estimate
	// starts from the same snapshot.
	hostScoped *bool
}

func newScaleUpRound(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health,
	groups []*podGroup, snapshot *simulator.Snapshot) *scaleUpRound {
	logger := klog.FromContext(ctx)
	r := &scaleUpRound{
		lc: lc, state: state, health: health, groups: groups, snapshot: snapshot,
		info:     make([]processors.NoScaleUpInfo, len(groups)),
		prepared: make([][]estimator.Pod, len(groups)),
		takes:    map[string][]int{},

		estimates: map[estimateKey]estimator.Result{},
	}
	for i, g := range groups {
		r.info[i] = processors.NoScaleUpInfo{Pods: g.pods, Rejected: map[string][]processors.Reason{}, Skipped: map[string][]processors.Reason{}}
		if g.gang != nil {
			r.info[i].Gang = &g.gang.gang
		}
		for _, p := range g.pods {
			ep, err := estimator.NewPod(p, g.check, i)
			if err != nil {
				logger.Error(err, "Leaving a pod out of the estimate")
				continue
			}
			r.prepared[i] = append(r.prepared[i], ep)
		}
	}
	return r
}

// estimateOptions estimates, node group by node group, how many nodes each
// needs for the pending pods within every limit: the expander's options.
func (a *Autoscaler) estimateOptions(ctx context.Context, r *scaleUpRound) ([]expander.Option, error) {
	logger := klog.FromContext(ctx)
	var options []expander.Option
	binpackingStart, estimated := time.Now(), 0
	for _, gs := range r.state.Groups {
		if estimated > 0 && a.opts.MaxBinpackingTime > 0 && time.Since(binpackingStart) > a.opts.MaxBinpackingTime {
			// As upstream's --max-binpacking-time, checked after each
			// estimate: the groups estimated so far are the options.
			logger.Info("Binpacking took longer than --max-binpacking-time; choosing among the node groups estimated so far",
				"maxBinpackingTime", a.opts.MaxBinpackingTime, "estimated", estimated)
			break
		}
		option, binpacked, err := a.estimateGroup(ctx, r, gs)
		if err != nil {
			return nil, err
		}
		if binpacked {
			estimated++
		}
		if option != nil {
			options = append(options, *option)
		}
	}
	a.reusedEstimates = r.reused
	logger.V(4).Info("Estimated node groups", "estimated", estimated, "reusedForTheSameShape", r.reused)
	return options, nil
}

// estimateGroup is one node group's option, nil when it adds no node, and
// whether the group got as far as the binpacking estimate.
func (a *Autoscaler) estimateGroup(ctx context.Context, r *scaleUpRound, gs *clusterstate.GroupState) (*expander.Option, bool, error) {
	id := gs.Group.Id()
	template := r.lc.Templates[id]
	if template == nil {
		for i := range r.groups {
			r.info[i].Skipped[id] = []processors.Reason{reasonNoTemplate}
		}
		return nil, false, nil
	}
	templateInfo, templateSlices, err := templateNodeInfo(template, id, "new")
	if err != nil {
		klog.FromContext(ctx).Error(err, "Skipping node group", "nodeGroup", id)
		return nil, false, nil
	}
	passing, err := r.passing(ctx, id, templateInfo, templateSlices)
	if err != nil {
		return nil, false, fmt.Errorf("checking node group %s: %w", id, err)
	}
	if len(passing) == 0 {
		return nil, false, nil
	}
	r.takes[id] = passing
	limit, capped := a.nodeLimit(ctx, r, gs, template.Node)
	if limit <= 0 {
		for _, i := range passing {
			r.info[i].Skipped[id] = capped
		}
		return nil, false, nil
	}
	est, units, err := a.estimate(ctx, r, id, template, templateInfo, limit, passing)
	if err != nil {
		return nil, false, fmt.Errorf("estimating node group %s: %w", id, err)
	}
	if len(capped) > 0 {
		r.skipLeftOut(id, passing, est.Unscheduled, capped)
	}
	a.gangsLeftOut(ctx, r, gs, units, est.Gangs, capped)
	if est.NodeCount == 0 {
		return nil, true, nil
	}
	return &expander.Option{
		NodeGroup: gs.Group,
		NodeCount: est.NodeCount,
		Pods:      est.Scheduled,
		Template:  template.Node,
		Debug:     fmt.Sprintf("%s: +%d nodes for %d pods", id, est.NodeCount, len(est.Scheduled)),
	}, true, nil
}

// passing are the pod groups that the node group's template takes; the others
// are marked rejected by it, with the scheduler's reasons. A template with
// devices is in the snapshot, with its slices, while the pods are checked:
// the DynamicResources plugin finds devices only in the snapshot.
func (r *scaleUpRound) passing(ctx context.Context, id string, templateInfo fwk.NodeInfo, slices []*resourcev1.ResourceSlice) ([]int, error) {
	if len(slices) > 0 {
		r.snapshot.Fork()
		defer r.snapshot.Revert()
		if err := r.snapshot.AddNode(templateInfo, slices...); err != nil {
			return nil, err
		}
	}
	var passing []int
	for i, g := range r.groups {
		if st := g.check.Fits(ctx, templateInfo); !st.IsSuccess() {
			r.info[i].Rejected[id] = predicateReasons(st)
			continue
		}
		passing = append(passing, i)
	}
	return passing, nil
}

// nodeLimit is how many nodes the group may add in this scale-up, and the
// reasons that held it below its max size: none when the group may add none
// for a reason of its own (not ready, backed off, at its max size), which is
// then the only reason returned.
func (a *Autoscaler) nodeLimit(ctx context.Context, r *scaleUpRound, gs *clusterstate.GroupState, template *corev1.Node) (int, []processors.Reason) {
	id := gs.Group.Id()
	// An unhealthy group (too few of its nodes ready) is not grown, as
	// upstream's: more nodes would likely not come up either.
	if !r.health.Groups[id].Healthy {
		return 0, []processors.Reason{reasonNotReady}
	}
	if backedOff, _ := a.registry.BackedOff(id, r.lc.Now); backedOff {
		return 0, []processors.Reason{reasonBackoff}
	}
	limit := gs.Max - gs.Target
	if limit <= 0 {
		return 0, []processors.Reason{reasonMaxSize}
	}
	if a.opts.MaxNodesPerScaleUp > 0 {
		limit = min(limit, a.opts.MaxNodesPerScaleUp)
	}
	var capped []processors.Reason
	for _, l := range a.limiters {
		headroom, reasons := l.Headroom(ctx, r.lc, gs.Group, template, limit)
		if headroom < limit {
			limit = headroom
			capped = append(capped, reasons...)
		}
	}
	return limit, capped
}

// skipLeftOut marks the pod groups with a pod the estimate left out as
// skipped by the node group for the limits that capped it.
func (r *scaleUpRound) skipLeftOut(id string, passing []int, unscheduled []*corev1.Pod, capped []processors.Reason) {
	if len(unscheduled) == 0 {
		return
	}
	left := map[*corev1.Pod]bool{}
	for _, p := range unscheduled {
		left[p] = true
	}
	for _, i := range passing {
		for _, p := range r.groups[i].pods {
			if left[p] {
				r.info[i].Skipped[id] = capped
				break
			}
		}
	}
}
