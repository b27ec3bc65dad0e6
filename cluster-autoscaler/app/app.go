// Package app wires the autoscaler together from its options: clients and
// informers, the cloud provider, the scheduling simulation, the expander chain and
// the processors. The binary and the in-process tests build it the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/builder"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/core"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/processors/capacityquota"
	"github.com/quotascale/quotascale/processors/status"
)

// Component is the name events and leases are recorded under, as upstream.
const Component = "cluster-autoscaler"

// Process is what lives as long as the process, leader or not: metrics and the
// health check, served by Serve. Every collector is registered here, once: an
// autoscaler built a second time in the same process reuses them, since
// registering a collector twice panics.
type Process struct {
	Metrics      *metrics.Metrics
	quotaMetrics *capacityquota.Metrics
	health       *health
	profiling    bool
}

// NewProcess creates the metrics registry and the health check.
func NewProcess(opts config.Options) *Process {
	m := metrics.New(metrics.Options{EmitPerNodeGroupMetrics: opts.EmitPerNodeGroupMetrics})
	m.SetResourceLimits(opts.MinCoresTotal, opts.MaxCoresTotal, opts.MinMemoryTotal, opts.MaxMemoryTotal)
	return &Process{
		Metrics:      m,
		quotaMetrics: capacityquota.NewMetrics(m.Registry, m.SkippedScaleEvents),
		health:       newHealth(opts.MaxInactivity, opts.MaxFailingTime),
		profiling:    opts.EnableProfiling,
	}
}

// Autoscaler is a wired autoscaler, ready to loop.
type Autoscaler struct {
	*Process
	opts     config.Options
	core     *core.Autoscaler
	provider cloudprovider.CloudProvider
	fresh    *freshness
	rootMin  func() corev1.ResourceList
	// unschedulable signals a pod newly marked unschedulable (loop.go).
	unschedulable <-chan struct{}
}

// New builds an autoscaler against the cluster restConfig reaches. ctx bounds
// every component; cancel it on shutdown.
func New(ctx context.Context, opts config.Options, restConfig *restclient.Config, process *Process) (*Autoscaler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c, err := connect(opts, restConfig)
	if err != nil {
		return nil, err
	}
	if err := requireCRDs(c.client, opts); err != nil {
		return nil, err
	}
	nodes, pods := c.factory.Core().V1().Nodes(), c.factory.Core().V1().Pods()
	provider, err := builder.NewCloudProvider(ctx, opts, builder.Cluster{
		Client: c.client, Config: c.config, Nodes: nodes.Lister(), UserAgent: Component})
	if err != nil {
		return nil, err
	}
	fw, err := newFramework(ctx, opts, c)
	if err != nil {
		return nil, err
	}
	configMaps := c.namespaced.Core().V1().ConfigMaps().Lister().ConfigMaps(opts.Namespace)
	strategy, err := expander.New(ctx, opts.Expander, expander.Deps{PriorityConfig: expander.PriorityConfigFromLister(configMaps)})
	if err != nil {
		return nil, fmt.Errorf("--expander: %w", err)
	}
	recorder := newRecorder(ctx, opts, c.client)
	quotas, err := newQuotas(opts, c, recorder, process.quotaMetrics)
	if err != nil {
		return nil, err
	}
	pgs, err := podGroups(c)
	if err != nil {
		return nil, err
	}
	if quotas.trees != nil {
		quotas.trees.PodGroups = pgs
	}
	visibility, err := openVisibilityLog(ctx, opts)
	if err != nil {
		return nil, err
	}
	actuator, err := scaledown.NewActuator(opts, c.client, provider, process.Metrics.RegisterEvictions)
	if err != nil {
		return nil, err
	}
	events := &status.EventProcessor{Recorder: recorder}
	deps := core.Deps{
		PodListProcessors:         quotas.podListProcessors(),
		Provider:                  provider,
		Nodes:                     nodes.Lister(),
		Pods:                      pods.Lister(),
		PodGroups:                 pgs,
		DaemonSets:                c.factory.Apps().V1().DaemonSets().Lister(),
		ResourceSlices:            c.factory.Resource().V1().ResourceSlices().Lister(),
		Framework:                 fw,
		Expander:                  strategy,
		Metrics:                   process.Metrics,
		Limiters:                  []processors.ScaleUpLimiter{quotas.capacity},
		StatusProcessors:          []processors.ScaleUpStatusProcessor{events, visibility},
		AfterLoop:                 []func(context.Context) error{(&capacityquota.StatusWriter{Client: c.dynamic, Processor: quotas.capacity}).Write},
		ScaleDownPlanner:          scaledown.NewPlanner(scaledown.PlannerOptions(opts), fw),
		ScaleDownActuator:         actuator,
		ScaleDownStatusProcessors: []processors.ScaleDownStatusProcessor{events, visibility},
		PDBs:                      c.factory.Policy().V1().PodDisruptionBudgets().Lister(),
		Controllers: &scaledown.Controllers{ReplicaSets: c.factory.Apps().V1().ReplicaSets().Lister(),
			ReplicationControllers: c.factory.Core().V1().ReplicationControllers().Lister()},
		RootMin: quotas.rootMin(),
	}
	if opts.WriteStatusConfigMap {
		writeStatusConfigMap(&deps, opts, c.client, recorder)
	}
	unschedulable, err := watchUnschedulable(pods.Informer())
	if err != nil {
		return nil, fmt.Errorf("watching for unschedulable pods: %w", err)
	}
	a := &Autoscaler{Process: process, opts: opts, core: core.New(opts, deps), provider: provider,
		fresh: &freshness{client: c.client, bound: opts.StaleDataBound}, rootMin: quotas.rootMin(), unschedulable: unschedulable}
	if err := c.start(ctx, quotas.informers); err != nil {
		return nil, err
	}
	return a, nil
}

// RootMin is the root min of the ElasticQuotaTree in force as the autoscaler
// sees it, which scale-down keeps allocatable for; nil without a tree or with
// --elastic-quota-enabled=false.
func (a *Autoscaler) RootMin() corev1.ResourceList {
	if a.rootMin == nil {
		return nil
	}
	return a.rootMin()
}

// RunOnce runs one loop now, unless the cluster data is too old to act on.
func (a *Autoscaler) RunOnce(ctx context.Context) error {
	now := time.Now()
	if ok, why := a.fresh.check(ctx, now); !ok {
		a.Metrics.RegisterStaleDataSkippedLoop()
		klog.FromContext(ctx).Info("Scaling nothing this loop", "reason", why)
		// A loop that ran but could not act is activity, not success.
		a.health.observe(now, errors.New(why))
		return nil
	}
	err := a.core.RunOnce(ctx, now)
	a.health.observe(now, err)
	return err
}
