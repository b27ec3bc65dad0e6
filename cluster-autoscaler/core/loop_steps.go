package core

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/pkg/devices"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/resources"
)

// The steps of one loop, in the order runOnce takes them.

// observe reads the cluster and the cloud provider: the nodes and pods, each
// node group's state and the cluster's health, and updates their metrics.
func (a *Autoscaler) observe(ctx context.Context, now time.Time) ([]*corev1.Node, []*corev1.Pod, *clusterstate.State, *clusterstate.Health, error) {
	stateStart := time.Now()
	nodes, err := a.Nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, nil, apiCallError(fmt.Errorf("listing nodes: %w", err))
	}
	pods, err := a.Pods.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, nil, apiCallError(fmt.Errorf("listing pods: %w", err))
	}
	a.Metrics.UpdateClusterResources(clusterResources(nodes))
	refreshStart := time.Now()
	err = a.Provider.Refresh()
	a.Metrics.ObserveDuration(metrics.CloudProviderRefresh, refreshStart)
	if err != nil {
		return nil, nil, nil, nil, cloudProviderError(fmt.Errorf("refreshing the cloud provider: %w", err))
	}
	state, err := a.registry.Update(ctx, a.Provider, nodes, now)
	if err != nil {
		return nil, nil, nil, nil, cloudProviderError(err)
	}
	health := a.registry.CheckHealth(a.healthOptions, state, nodes)
	a.Metrics.UpdateClusterState(health.ClusterHealthy, health.NodeCounts())
	a.updateGroupMetrics(state, health)
	a.Metrics.ObserveDuration(metrics.UpdateState, stateStart)
	return nodes, pods, state, health, nil
}

// heal lowers the targets that ran ahead of their instances and removes
// failed instances. It reports whether the loop ends here: as upstream's, the
// loop after a lowered target reads the lowered targets afresh.
func (a *Autoscaler) heal(ctx context.Context, state *clusterstate.State, now time.Time) (bool, error) {
	fixed, err := a.fixNodeGroupSizes(ctx, state, now)
	if err != nil {
		return true, cloudProviderError(err)
	}
	if fixed {
		klog.FromContext(ctx).Info("Lowered node group target sizes; skipping the rest of this loop")
		return true, nil
	}
	a.removeFailedInstances(ctx, state)
	return false, nil
}

// clusterNotReady says whether the cluster is in no state to autoscale, as
// upstream's checks of an empty cluster and of too many unready nodes, and
// says why where upstream does.
func (a *Autoscaler) clusterNotReady(ctx context.Context, health *clusterstate.Health, nodes []*corev1.Node, now time.Time) bool {
	logger := klog.FromContext(ctx)
	if !a.opts.ScaleUpFromZero && health.Cluster.Ready == 0 {
		// As upstream's empty-cluster check with --scale-up-from-zero=false:
		// nothing is done until a node is ready.
		why := "Cluster has no ready nodes."
		if len(nodes) == 0 {
			why = "Cluster has no nodes."
		}
		logger.Info("Scaling nothing: " + why)
		a.Metrics.UpdateClusterState(false, metrics.NodeCounts{})
		if a.ScaleDownPlanner != nil {
			a.ScaleDownPlanner.Forget()
		}
		a.initializing = why
		// Nodes may not be ready yet when the autoscaler starts: say so
		// only after upstream's ten minutes, or at once without nodes.
		if len(nodes) == 0 || now.Sub(a.started) > nodesNotReadyAfterStart {
			a.clusterEvent(corev1.EventTypeWarning, "ClusterUnhealthy", why)
		}
		return true
	}
	if !health.ClusterHealthy {
		// As upstream: scale nothing, forget the unneeded nodes so that their
		// unneeded time starts over, and say why on the status ConfigMap.
		logger.Info("Cluster is not ready for autoscaling: too many unready nodes",
			"unready", health.Cluster.Unready, "nodes", len(nodes),
			"maxTotalUnreadyPercentage", a.healthOptions.MaxTotalUnreadyPercentage, "okTotalUnreadyCount", a.healthOptions.OkTotalUnreadyCount)
		if a.ScaleDownPlanner != nil {
			a.ScaleDownPlanner.Forget()
		}
		a.clusterEvent(corev1.EventTypeWarning, "ClusterUnhealthy", "Cluster is unhealthy")
		return true
	}
	return false
}

// sortPods splits the pods into those bound to a node and still running, and
// those waiting for one; unprocessed counts the pending pods of
// --bypassed-scheduler-names that their scheduler has not marked
// unschedulable (yet).
func (a *Autoscaler) sortPods(ctx context.Context, pods []*corev1.Pod, now time.Time) (bound, pending []*corev1.Pod, unprocessed int) {
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "":
			if !resources.PodFinished(p) {
				bound = append(bound, p)
			}
		case a.unschedulable(ctx, p, now):
			pending = append(pending, p)
			if !markedUnschedulable(p) {
				unprocessed++
			}
		}
	}
	return bound, pending, unprocessed
}

// loopContext is what the processors see of this loop: the node groups, their
// upcoming nodes and their templates. Each template's node is also put in
// templates, for the failures the deferred status write records.
func (a *Autoscaler) loopContext(ctx context.Context, state *clusterstate.State, nodes []*corev1.Node, bound []*corev1.Pod,
	templates map[string]*corev1.Node, now time.Time) (*processors.LoopContext, error) {
	logger := klog.FromContext(ctx)
	lc := &processors.LoopContext{
		Now:       now,
		Nodes:     nodes,
		Templates: map[string]*cloudprovider.NodeInfo{},
		Upcoming:  map[string]int{},
	}
	var daemonsets []*appsv1.DaemonSet
	if a.DaemonSets != nil {
		var err error
		if daemonsets, err = a.DaemonSets.List(labels.Everything()); err != nil {
			return nil, fmt.Errorf("listing daemonsets: %w", err)
		}
	}
	groupOf := func(n *corev1.Node) string {
		if g, err := a.Provider.NodeGroupForNode(n); err == nil && g != nil {
			return g.Id()
		}
		return ""
	}
	var slices []*resourcev1.ResourceSlice
	if a.ResourceSlices != nil {
		var err error
		if slices, err = a.ResourceSlices.List(labels.Everything()); err != nil {
			return nil, fmt.Errorf("listing resource slices: %w", err)
		}
	}
	tmpl := newTemplates(a.taints, a.opts.ForceDaemonSets, nodes, groupOf, bound, daemonsets)
	tmpl.slices = devices.CurrentByNode(slices)
	for _, gs := range state.Groups {
		lc.Groups = append(lc.Groups, gs.Group)
		lc.Upcoming[gs.Group.Id()] = gs.Upcoming
		t, err := tmpl.forGroup(ctx, gs.Group)
		if err != nil {
			logger.Error(err, "No template for node group", "nodeGroup", gs.Group.Id())
			continue
		}
		if a.opts.ScaleFromUnschedulable && t.Node.Spec.Unschedulable {
			// Upstream's --scale-from-unschedulable: a template's
			// spec.unschedulable does not keep pods off new nodes.
			t = &cloudprovider.NodeInfo{Node: t.Node.DeepCopy(), Pods: t.Pods, ResourceSlices: t.ResourceSlices}
			t.Node.Spec.Unschedulable = false
		}
		lc.Templates[gs.Group.Id()] = t
		templates[gs.Group.Id()] = t.Node
	}
	return lc, nil
}

// scaleUpPending scales up for the pending pods, if any, and hands the outcome
// to the status processors.
func (a *Autoscaler) scaleUpPending(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health,
	nodes []*corev1.Node, bound, pending []*corev1.Pod) (*processors.ScaleUpStatus, error) {
	status := &processors.ScaleUpStatus{Result: processors.ScaleUpNotNeeded}
	if len(pending) > 0 {
		scaleUpStart := time.Now()
		a.Metrics.SetLastActivity(metrics.ScaleUp, scaleUpStart)
		var err error
		status, err = a.scaleUpFor(ctx, lc, state, health, nodes, bound, pending)
		a.Metrics.ObserveDuration(metrics.ScaleUp, scaleUpStart)
		if err != nil {
			return nil, err
		}
	}
	for _, p := range a.StatusProcessors {
		p.Process(ctx, lc, status)
	}
	if status.Result == processors.ScaleUpError {
		klog.FromContext(ctx).Error(status.Error, "Scale-up failed")
	}
	return status, nil
}

// finishLoop grows groups below their min size (--enforce-node-group-min-size)
// and runs the after-loop hooks.
func (a *Autoscaler) finishLoop(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health) {
	logger := klog.FromContext(ctx)
	if a.opts.EnforceNodeGroupMinSize {
		if minStatus := a.scaleUpToMinSize(ctx, lc, state, health); minStatus != nil {
			for _, p := range a.StatusProcessors {
				p.Process(ctx, lc, minStatus)
			}
			if minStatus.Result == processors.ScaleUpError {
				logger.Error(minStatus.Error, "Scale-up to min size failed")
			}
		}
	}
	for _, after := range a.AfterLoop {
		if err := after(ctx); err != nil {
			logger.Error(err, "After the loop")
		}
	}
}
