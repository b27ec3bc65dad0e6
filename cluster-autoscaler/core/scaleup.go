package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
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
	status := &processors.ScaleUpStatus{Result: processors.ScaleUpNotNeeded}
	if len(groups) == 0 {
		return status, nil
	}
	r := newScaleUpRound(ctx, lc, state, health, groups, snapshot)
	options, err := a.estimateOptions(ctx, r)
	if err != nil {
		return nil, err
	}
	if len(options) == 0 {
		status.Result = processors.ScaleUpNoOptionsAvailable
		status.PodsRemainUnschedulable = r.info
		return status, nil
	}
	best, increases := a.chooseIncreases(ctx, r, options)
	a.executeIncreases(ctx, r, increases, status)
	if len(status.Increases) == 0 {
		if status.Result != processors.ScaleUpError {
			status.Result = processors.ScaleUpNoOptionsAvailable
		}
		status.PodsRemainUnschedulable = r.info
		return status, nil
	}
	if status.Result != processors.ScaleUpError {
		status.Result = processors.ScaleUpSuccessful
	}
	status.PodsTriggeredScaleUp = best.Pods
	status.PodsRemainUnschedulable = remainingUnschedulable(r.info, best.Pods)
	return status, nil
}

// chooseIncreases asks the expander for the best option and, with
// --balance-similar-node-groups, spreads its node count over the groups
// similar to it. It returns the option chosen and each group's increase.
func (a *Autoscaler) chooseIncreases(ctx context.Context, r *scaleUpRound, options []expander.Option) (*expander.Option, map[string]int) {
	best := a.expander.BestOption(options)
	if !a.opts.BalanceSimilarNodeGroups || carriesGang(r.groups, best.Pods) {
		return best, map[string]int{best.NodeGroup.Id(): best.NodeCount}
	}
	// The demand is the largest estimate among the similar groups: the best
	// group's own estimate may be cut short by a limit the others do not share.
	chosen := best.NodeGroup.Id()
	for i := range options {
		id := options[i].NodeGroup.Id()
		if options[i].NodeCount > best.NodeCount && slices.Equal(r.takes[chosen], r.takes[id]) &&
			a.similarity.similar(r.lc.Templates[chosen], r.lc.Templates[id]) {
			best = &options[i]
		}
	}
	return best, a.balance(ctx, r.lc, r.state, r.health, best.NodeGroup, best.NodeCount, r.takes)
}

// executeIncreases resizes the groups in the order of their ids and records
// each outcome in status: the increases made, and the failures as an error.
func (a *Autoscaler) executeIncreases(ctx context.Context, r *scaleUpRound, increases map[string]int, status *processors.ScaleUpStatus) {
	ids := make([]string, 0, len(increases))
	for id, delta := range increases {
		if delta > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	errs := a.increaseSizes(ctx, r.state, ids, increases)
	var failed []error
	for i, id := range ids {
		gs, delta := r.state.Group(id), increases[id]
		switch {
		case errs[i] == errNotTried:
			continue
		case errs[i] != nil:
			a.registry.RegisterFailedScaleUp(id, delta, errs[i], r.lc.Now)
			failed = append(failed, fmt.Errorf("increasing node group %s by %d: %w", id, delta, errs[i]))
			continue
		}
		a.registerScaleUp(r.lc, gs, delta)
		if !a.opts.BalanceSimilarNodeGroups {
			for _, l := range a.limiters {
				l.Planned(ctx, r.lc, gs.Group, r.lc.Templates[id].Node, delta)
			}
		}
		status.Increases = append(status.Increases, processors.GroupIncrease{Group: gs.Group, Current: gs.Target, New: gs.Target + delta, Max: gs.Max})
	}
	if len(failed) > 0 {
		status.Result = processors.ScaleUpError
		status.Error = errors.Join(failed...)
	}
}

// remainingUnschedulable is what info says of the pods the scale-up does not
// help, leaving out the pod groups it helps whole.
func remainingUnschedulable(info []processors.NoScaleUpInfo, helpedPods []*corev1.Pod) []processors.NoScaleUpInfo {
	helped := map[*corev1.Pod]bool{}
	for _, p := range helpedPods {
		helped[p] = true
	}
	var out []processors.NoScaleUpInfo
	for i := range info {
		var rest []*corev1.Pod
		for _, p := range info[i].Pods {
			if !helped[p] {
				rest = append(rest, p)
			}
		}
		if len(rest) > 0 {
			info[i].Pods = rest
			out = append(out, info[i])
		}
	}
	return out
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
		// A replica that stopped leading while this loop ran must not
		// resize: the next leader may already be deciding for the same pods.
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("not resizing node group %s: %w", ids[i], context.Cause(ctx))
			return
		}
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
