package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/estimator"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/processors"
)

// Skip reasons, in upstream's words.
var (
	reasonMaxSize     = processors.NewReason(processors.MessageNodeGroupSkipped, "max node group size reached")
	reasonBackoff     = processors.NewReason(processors.MessageNodeGroupSkipped, "in backoff after failed scale-up")
	reasonNoTemplate  = processors.NewReason(processors.MessageNodeGroupSkipped, "no node template")
	reasonMaxPerScale = processors.NewReason(processors.MessageNodeGroupSkipped, "max nodes per scale-up reached")
	reasonNotReady    = processors.NewReason(processors.MessageNodeGroupSkipped, "not ready for scale-up")
)

// scaleUp picks one node group to grow for the pending pods, the way upstream's
// orchestrator does: predicates on each template, an estimate of how many nodes
// each group needs within every limit, the expander's choice, IncreaseSize.
func (a *Autoscaler) scaleUp(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health, groups []*podGroup,
	snapshot *simulator.Snapshot) (*processors.ScaleUpStatus, error) {
	logger := klog.FromContext(ctx)
	status := &processors.ScaleUpStatus{Result: processors.ScaleUpNotNeeded}
	if len(groups) == 0 {
		return status, nil
	}
	info := make([]processors.NoScaleUpInfo, len(groups))
	for i, g := range groups {
		info[i] = processors.NoScaleUpInfo{Pods: g.pods, Rejected: map[string][]processors.Reason{}, Skipped: map[string][]processors.Reason{}}
	}
	// Estimation sees the same pods for every node group: prepare them once.
	prepared := make([][]estimator.Pod, len(groups))
	for i, g := range groups {
		for _, p := range g.pods {
			ep, err := estimator.NewPod(p, g.check, i)
			if err != nil {
				logger.Error(err, "Leaving a pod out of the estimate")
				continue
			}
			prepared[i] = append(prepared[i], ep)
		}
	}

	var options []expander.Option
	// takes are the pod groups each node group's template takes: groups are
	// balanced only with groups that take the same ones, as upstream's.
	takes := map[string][]int{}
	binpackingStart, estimated := time.Now(), 0
	for _, gs := range state.Groups {
		if estimated > 0 && a.opts.MaxBinpackingTime > 0 && time.Since(binpackingStart) > a.opts.MaxBinpackingTime {
			// As upstream's --max-binpacking-time, checked after each
			// estimate: the groups estimated so far are the options.
			logger.Info("Binpacking took longer than --max-binpacking-time; choosing among the node groups estimated so far",
				"maxBinpackingTime", a.opts.MaxBinpackingTime, "estimated", estimated)
			break
		}
		id := gs.Group.Id()
		template := lc.Templates[id]
		if template == nil {
			for i := range groups {
				info[i].Skipped[id] = []processors.Reason{reasonNoTemplate}
			}
			continue
		}
		templateInfo, err := simulator.NewNodeInfo(templateNode(template.Node, id, "new"), template.Pods...)
		if err != nil {
			logger.Error(err, "Skipping node group", "nodeGroup", id)
			continue
		}
		var passing []int
		for i, g := range groups {
			if st := g.check.Fits(ctx, templateInfo); !st.IsSuccess() {
				info[i].Rejected[id] = predicateReasons(st)
				continue
			}
			passing = append(passing, i)
		}
		if len(passing) == 0 {
			continue
		}
		takes[id] = passing
		skip := func(reasons ...processors.Reason) {
			for _, i := range passing {
				info[i].Skipped[id] = reasons
			}
		}
		// An unhealthy group (too few of its nodes ready) is not grown, as
		// upstream's: more nodes would likely not come up either.
		if !health.Groups[id].Healthy {
			skip(reasonNotReady)
			continue
		}
		if backedOff, _ := a.registry.BackedOff(id, lc.Now); backedOff {
			skip(reasonBackoff)
			continue
		}
		limit := gs.Max - gs.Target
		if limit <= 0 {
			skip(reasonMaxSize)
			continue
		}
		if a.opts.MaxNodesPerScaleUp > 0 {
			limit = min(limit, a.opts.MaxNodesPerScaleUp)
		}
		var capped []processors.Reason
		for _, l := range a.limiters {
			headroom, reasons := l.Headroom(ctx, lc, gs.Group, template.Node, limit)
			if headroom < limit {
				limit = headroom
				capped = append(capped, reasons...)
			}
		}
		if limit <= 0 {
			skip(capped...)
			continue
		}
		var pods []estimator.Pod
		for _, i := range passing {
			pods = append(pods, prepared[i]...)
		}
		newNode := func(i int) (fwk.NodeInfo, error) { return templateNodeInfo(template, id, fmt.Sprintf("new-%d", i)) }
		est, err := estimator.Binpack(ctx, snapshot, pods, newNode, templateInfo, limit, a.opts.MaxNodeGroupBinpackingDuration)
		if err != nil {
			return nil, fmt.Errorf("estimating node group %s: %w", id, err)
		}
		estimated++
		if len(capped) > 0 && len(est.Unscheduled) > 0 {
			// The pods the limit left out are skipped because of it.
			left := map[*corev1.Pod]bool{}
			for _, p := range est.Unscheduled {
				left[p] = true
			}
			for _, i := range passing {
				for _, p := range groups[i].pods {
					if left[p] {
						info[i].Skipped[id] = capped
						break
					}
				}
			}
		}
		if est.NodeCount == 0 {
			continue
		}
		options = append(options, expander.Option{
			NodeGroup: gs.Group,
			NodeCount: est.NodeCount,
			Pods:      est.Scheduled,
			Template:  template.Node,
			Debug:     fmt.Sprintf("%s: +%d nodes for %d pods", id, est.NodeCount, len(est.Scheduled)),
		})
	}

	if len(options) == 0 {
		status.Result = processors.ScaleUpNoOptionsAvailable
		status.PodsRemainUnschedulable = info
		return status, nil
	}
	best := a.expander.BestOption(options)
	increases := map[string]int{best.NodeGroup.Id(): best.NodeCount}
	if a.opts.BalanceSimilarNodeGroups {
		// The demand is the largest estimate among the similar groups: the best
		// group's own estimate may be cut short by a limit the others do not share.
		chosen := best.NodeGroup.Id()
		for i := range options {
			id := options[i].NodeGroup.Id()
			if options[i].NodeCount > best.NodeCount && slices.Equal(takes[chosen], takes[id]) &&
				a.similarity.similar(lc.Templates[chosen], lc.Templates[id]) {
				best = &options[i]
			}
		}
		increases = a.balance(ctx, lc, state, health, best.NodeGroup, best.NodeCount, takes)
	}
	ids := make([]string, 0, len(increases))
	for id, delta := range increases {
		if delta > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	errs := a.increaseSizes(ctx, state, ids, increases)
	var failed []error
	for i, id := range ids {
		gs, delta := state.Group(id), increases[id]
		switch {
		case errs[i] == errNotTried:
			continue
		case errs[i] != nil:
			a.registry.RegisterFailedScaleUp(id, delta, errs[i], lc.Now)
			failed = append(failed, fmt.Errorf("increasing node group %s by %d: %w", id, delta, errs[i]))
			continue
		}
		a.registerScaleUp(lc, gs, delta)
		if !a.opts.BalanceSimilarNodeGroups {
			for _, l := range a.limiters {
				l.Planned(ctx, lc, gs.Group, lc.Templates[id].Node, delta)
			}
		}
		status.Increases = append(status.Increases, processors.GroupIncrease{Group: gs.Group, Current: gs.Target, New: gs.Target + delta, Max: gs.Max})
	}
	if len(failed) > 0 {
		status.Result = processors.ScaleUpError
		status.Error = errors.Join(failed...)
	}
	if len(status.Increases) == 0 {
		if status.Result != processors.ScaleUpError {
			status.Result = processors.ScaleUpNoOptionsAvailable
		}
		status.PodsRemainUnschedulable = info
		return status, nil
	}
	if status.Result != processors.ScaleUpError {
		status.Result = processors.ScaleUpSuccessful
	}
	status.PodsTriggeredScaleUp = best.Pods
	helped := map[*corev1.Pod]bool{}
	for _, p := range best.Pods {
		helped[p] = true
	}
	for i := range info {
		var rest []*corev1.Pod
		for _, p := range info[i].Pods {
			if !helped[p] {
				rest = append(rest, p)
			}
		}
		if len(rest) > 0 {
			info[i].Pods = rest
			status.PodsRemainUnschedulable = append(status.PodsRemainUnschedulable, info[i])
		}
	}
	return status, nil
}

// predicateReasons turns a Filter refusal into reasons, sorted.
func predicateReasons(st *fwk.Status) []processors.Reason {
	texts := st.Reasons()
	if len(texts) == 0 {
		texts = []string{st.Message()}
	}
	sort.Strings(texts)
	out := make([]processors.Reason, 0, len(texts))
	for _, t := range texts {
		r := processors.NewReason(processors.MessageNodeGroupRejected, t)
		r.Plugin = st.Plugin()
		out = append(out, r)
	}
	return out
}

// registerScaleUp records a successful increase of a group by delta: for
// backoff and health, for the metrics, and to start the next loop at once.
func (a *Autoscaler) registerScaleUp(lc *processors.LoopContext, gs *clusterstate.GroupState, delta int) {
	id := gs.Group.Id()
	a.registry.RegisterScaleUp(id, gs.Target+delta, delta, lc.Now)
	a.Metrics.RegisterScaleUp(delta, metrics.GPUOf(lc.Templates[id].Node, nil))
	a.productive = true
}

// errNotTried marks the groups a scale-up did not resize because an earlier
// one failed.
var errNotTried = errors.New("not tried after an earlier failure")

// increaseSizes resizes the groups of one scale-up, as upstream's executor:
// with --parallel-scale-up all at once; otherwise one after another, stopping
// at the first failure (the rest are errNotTried).
func (a *Autoscaler) increaseSizes(ctx context.Context, state *clusterstate.State, ids []string, increases map[string]int) []error {
	logger := klog.FromContext(ctx)
	errs := make([]error, len(ids))
	increase := func(i int) {
		gs, delta := state.Group(ids[i]), increases[ids[i]]
		logger.Info("Scale-up", "nodeGroup", ids[i], "from", gs.Target, "to", gs.Target+delta, "max", gs.Max)
		errs[i] = gs.Group.IncreaseSize(delta)
	}
	if !a.opts.ParallelScaleUp {
		for i := range ids {
			increase(i)
			if errs[i] != nil {
				for j := i + 1; j < len(ids); j++ {
					errs[j] = errNotTried
				}
				break
			}
		}
		return errs
	}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			increase(i)
		}()
	}
	wg.Wait()
	return errs
}
