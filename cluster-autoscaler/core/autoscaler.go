// Package core is the autoscaler's loop: read the cluster, account for nodes on
// their way, find the pods no node can take, and grow the node group that serves
// them best within every limit.
package core

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/processors"
)

// Deps are what the loop works with; tests and the binary build them alike.
type Deps struct {
	Provider cloudprovider.CloudProvider
	Nodes    corelisters.NodeLister
	Pods     corelisters.PodLister
	// DaemonSets' pods are part of the templates; nil means none.
	DaemonSets appslisters.DaemonSetLister
	// PodGroups looks up the Workload API's PodGroups, which name the size
	// of a gang; nil where the API is not served.
	PodGroups func(namespace, name string) (*schedulingv1beta1.PodGroup, bool)
	// ResourceSlices of a group's example node are part of its template; nil
	// means none (Dynamic Resource Allocation off).
	ResourceSlices    resourcelisters.ResourceSliceLister
	Framework         *simulator.Framework
	Expander          expander.Strategy
	Metrics           *metrics.Metrics
	PodListProcessors []processors.PodListProcessor
	Limiters          []processors.ScaleUpLimiter
	StatusProcessors  []processors.ScaleUpStatusProcessor
	// WriteStatus writes the status ConfigMap; nil when disabled.
	WriteStatus func(ctx context.Context, status api.Status, now time.Time) error
	// Event records an event about the autoscaler itself, on its status
	// ConfigMap as upstream's; nil records none.
	Event func(eventType, reason, message string)
	// AfterLoop run at the end of every loop, e.g. to write CapacityQuota status.
	AfterLoop []func(ctx context.Context) error

	// Scale-down; a nil planner turns it off.
	ScaleDownPlanner          *scaledown.Planner
	ScaleDownActuator         *scaledown.Actuator
	ScaleDownStatusProcessors []processors.ScaleDownStatusProcessor
	PDBs                      policylisters.PodDisruptionBudgetLister
	// Controllers look up pods' ReplicaSets for --min-replica-count.
	Controllers *scaledown.Controllers
	// RootMin returns the ElasticQuotaTree root's min, which scale-down keeps
	// allocatable for; nil without a tree.
	RootMin func() corev1.ResourceList
}

// Autoscaler runs one loop at a time.
type Autoscaler struct {
	Deps
	opts     config.Options
	registry *clusterstate.Registry
	limiters []processors.ScaleUpLimiter
	expander expander.Strategy
	// lastScaleDownFailure starts --scale-down-delay-after-failure.
	lastScaleDownFailure time.Time
	healthOptions        clusterstate.HealthOptions
	similarity           similarity
	// lastStatus is the status document last written.
	lastStatus api.Status
	// productive says the last loop scaled up or removed a node.
	productive bool
	// initializing, when set, is why the loop waits for the cluster: the
	// status then says Initializing with it, as upstream's.
	initializing string
	started      time.Time
	// Scale-down's trackers (scaledowntrack.go).
	latency           removalLatency
	skippedSince      map[string]time.Time
	softTaintsCleaned bool
	// lastScaleDownDelete starts --scale-down-delay-after-delete.
	lastScaleDownDelete time.Time
	// groupScaleDownFailure and groupScaleDownDelete are the same per node
	// group, for --scale-down-delay-type-local.
	groupScaleDownFailure, groupScaleDownDelete map[string]time.Time
	// bypassed are --bypassed-scheduler-names.
	bypassed map[string]bool
	taints   nodetemplate.TaintConfig
	// reusedEstimates counts the node groups whose estimate the last
	// scale-up took from a group of the same shape; estimateEveryGroup
	// turns that reuse off, for tests that compare the two.
	reusedEstimates    int
	estimateEveryGroup bool
	// nodeInfos keeps the registered nodes' NodeInfos from loop to loop.
	nodeInfos *simulator.NodeInfoCache
}

// nodesNotReadyAfterStart is how long after the start a cluster without a
// ready node is reported, as upstream's NodesNotReadyAfterStartTimeout.
const nodesNotReadyAfterStart = 10 * time.Minute

// Productive reports whether the last loop scaled a node group up or removed
// a node, after which upstream starts the next loop at once.
func (a *Autoscaler) Productive() bool { return a.productive }

// New builds an autoscaler.
func New(opts config.Options, deps Deps) *Autoscaler {
	bypassed := map[string]bool{}
	for _, name := range opts.BypassedSchedulerNames {
		bypassed[name] = true
	}
	return &Autoscaler{
		Deps: deps,
		opts: opts,
		registry: clusterstate.NewRegistry(clusterstate.Options{
			MaxNodeProvisionTime: opts.MaxNodeProvisionTime,
			Backoff: clusterstate.BackoffOptions{
				Initial: opts.InitialNodeGroupBackoffDuration,
				Max:     opts.MaxNodeGroupBackoffDuration,
				Reset:   opts.NodeGroupBackoffResetTimeout,
			},
		}),
		limiters:   deps.Limiters,
		expander:   deps.Expander,
		started:    time.Now(),
		similarity: newSimilarity(opts),
		bypassed:   bypassed,
		taints:     newTaintConfig(opts),
		healthOptions: clusterstate.HealthOptions{
			MaxTotalUnreadyPercentage: opts.MaxTotalUnreadyPercentage,
			OkTotalUnreadyCount:       opts.OkTotalUnreadyCount,
			MaxNodeStartupTime:        opts.MaxNodeStartupTime,
		},

		groupScaleDownFailure: map[string]time.Time{},
		groupScaleDownDelete:  map[string]time.Time{},
		nodeInfos:             simulator.NewNodeInfoCache(),
	}
}

// RunOnce is one loop, counted as upstream's main loop: last_activity main at
// its start, mainSuccessful when it ends without error, errors_total by the
// error's type otherwise, and its duration.
func (a *Autoscaler) RunOnce(ctx context.Context, now time.Time) error {
	start := time.Now()
	a.Metrics.SetLastActivity(metrics.Main, now)
	err := a.runOnce(ctx, now)
	if err != nil {
		a.Metrics.RegisterError(errorType(err))
	} else {
		a.Metrics.SetLastActivity(metrics.MainSuccessful, time.Now())
	}
	a.Metrics.ObserveDuration(metrics.Main, start)
	return err
}

func (a *Autoscaler) runOnce(ctx context.Context, now time.Time) error {
	a.productive = false
	a.initializing = ""
	nodes, pods, state, health, err := a.observe(ctx, now)
	if err != nil {
		return err
	}
	// The status is written whatever the loop does from here, as upstream's,
	// and the failed scale-ups of the loop are counted.
	var unneeded map[string]int
	templates := map[string]*corev1.Node{}
	defer func() {
		a.recordFailures(templates)
		a.writeStatus(ctx, health, unneeded, now)
	}()

	if done, err := a.heal(ctx, state, now); done || err != nil {
		return err
	}
	if a.clusterNotReady(ctx, health, nodes, now) {
		return nil
	}
	bound, pending, unprocessed := a.sortPods(ctx, pods, now)
	lc, err := a.loopContext(ctx, state, nodes, bound, templates, now)
	if err != nil {
		return err
	}
	for _, l := range a.limiters {
		if err := l.StartLoop(ctx, lc); err != nil {
			return err
		}
	}
	a.Metrics.SetLastActivity(metrics.Autoscaling, time.Now())
	a.Metrics.UpdateUnschedulablePods(len(pending)-unprocessed, unprocessed)

	status, err := a.scaleUpPending(ctx, lc, state, health, nodes, bound, pending)
	if err != nil {
		return err
	}
	unneeded, err = a.scaleDown(ctx, lc, state, bound, status.Result == processors.ScaleUpSuccessful)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Scale-down")
	}
	a.finishLoop(ctx, lc, state, health)
	return nil
}

// clusterEvent records an event about the autoscaler, when events are wired.
func (a *Autoscaler) clusterEvent(eventType, reason, message string) {
	if a.Event != nil {
		a.Event(eventType, reason, message)
	}
}

// writeStatus writes the status ConfigMap, when enabled, keeping the last
// document for its transition times.
func (a *Autoscaler) writeStatus(ctx context.Context, health *clusterstate.Health, unneeded map[string]int, now time.Time) {
	if a.WriteStatus == nil {
		return
	}
	a.lastStatus = a.registry.Status(health, unneeded, a.lastStatus)
	if a.initializing != "" {
		a.lastStatus = api.Status{AutoscalerStatus: api.Initializing, Message: a.initializing}
	}
	if err := a.WriteStatus(ctx, a.lastStatus, now); err != nil {
		klog.FromContext(ctx).Error(err, "Writing the status ConfigMap")
	}
}

func (a *Autoscaler) scaleUpFor(ctx context.Context, lc *processors.LoopContext, state *clusterstate.State, health *clusterstate.Health,
	nodes []*corev1.Node, bound, pending []*corev1.Pod) (*processors.ScaleUpStatus, error) {
	var refused []processors.RefusedPod
	for _, p := range a.PodListProcessors {
		kept, r, err := p.Process(ctx, lc, pending)
		if err != nil {
			return nil, err
		}
		pending = kept
		refused = append(refused, r...)
	}
	pending, gangs, refusedGangs, err := a.gangsOf(ctx, pending)
	if err != nil {
		return nil, err
	}
	refused = append(refused, refusedGangs...)
	snapshot := a.nodeInfos.Snapshot(nodes, bound)
	if err := addUpcoming(snapshot, state, lc.Templates); err != nil {
		return nil, err
	}
	a.Framework.SetSnapshot(snapshot)
	groups := assignGangs(groupPods(pending), gangs)
	for _, g := range groups {
		g.check = a.Framework.PreFilter(ctx, g.sample())
	}
	remaining := placeOnExisting(ctx, groups, snapshot)
	placedOnFreeRoom(groups, remaining)
	groups = remaining
	status, err := a.scaleUp(ctx, lc, state, health, groups, snapshot)
	if err != nil {
		return nil, err
	}
	status.Refused = refused
	if len(refused) > 0 && status.Result == processors.ScaleUpNotNeeded {
		status.Result = processors.ScaleUpNoOptionsAvailable
	}
	return status, nil
}

// removeFailedInstances deletes instances that registered too late, then
// instances that failed to come up, as upstream does, so that they stop
// counting as upcoming capacity once the infrastructure has removed them.
// Late ones are removed down to the group's min size only, failed ones as far
// as DeleteNodes allows; --force-delete-unregistered-nodes and
// --force-delete-failed-nodes remove them regardless of the min size.
func (a *Autoscaler) removeFailedInstances(ctx context.Context, state *clusterstate.State) {
	logger := klog.FromContext(ctx)
	for _, gs := range state.Groups {
		late := gs.Late
		if len(late) > 0 && !a.opts.ForceDeleteUnregisteredNodes {
			room := gs.Target - gs.Min
			if room <= 0 {
				logger.Info("Node group at its min size: keeping its unregistered instances", "nodeGroup", gs.Group.Id(), "instances", len(late))
				late = nil
			} else if len(late) > room {
				late = late[:room]
			}
		}
		a.deleteInstances(ctx, gs, late, a.opts.ForceDeleteUnregisteredNodes, "unregistered")
		a.deleteInstances(ctx, gs, gs.Failed, a.opts.ForceDeleteFailedNodes, "failed")
	}
}

func (a *Autoscaler) deleteInstances(ctx context.Context, gs *clusterstate.GroupState, instances []cloudprovider.Instance, force bool, kind string) {
	if len(instances) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	placeholders := make([]*corev1.Node, 0, len(instances))
	for _, in := range instances {
		n := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: in.Id}}
		n.Name = in.Id
		placeholders = append(placeholders, n)
	}
	err := cloudprovider.ErrNotImplemented
	if force {
		err = gs.Group.ForceDeleteNodes(placeholders)
	}
	if errors.Is(err, cloudprovider.ErrNotImplemented) {
		err = gs.Group.DeleteNodes(placeholders)
	}
	if err != nil {
		logger.Error(err, "Removing instances", "nodeGroup", gs.Group.Id(), "kind", kind, "instances", len(placeholders))
		return
	}
	logger.Info("Removed instances", "nodeGroup", gs.Group.Id(), "kind", kind, "instances", len(placeholders), "force", force)
}
