package localcluster

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
	"github.com/quotascale/quotascale/scheduler/webhook"
)

// SchedulerOptions configure the in-process kube-scheduler. The zero value is
// Quotascale's scheduler: the default profile with CapacityScheduling enabled.
type SchedulerOptions struct {
	// Config is the KubeSchedulerConfiguration, as a scheduler binary would read it
	// from --config. Nil means the default profile plus CapacityScheduling, or the
	// plain upstream default profile with WithoutQuota.
	Config *configv1.KubeSchedulerConfiguration
	// Registry holds out-of-tree plugins, as app.WithPlugin adds them to the
	// binary. CapacityScheduling is always registered, told whether its
	// replica leads; one given here is used as is (capacityscheduling.New
	// writes no tree status).
	Registry frameworkruntime.Registry
	// WithoutQuota runs the stock scheduler, for comparisons.
	WithoutQuota bool
}

// QuotaProfile is the default-scheduler profile with CapacityScheduling enabled at
// every extension point it implements, and DefaultPreemption off: CapacityScheduling's
// PostFilter takes its place, running DefaultPreemption itself for pods no tree
// governs, DefaultPreemption within quota for pods their quota admits, and reclaim
// for pods their quota refuses; its PodGroupPostFilter runs DefaultPreemption's
// for pod groups no tree governs, and reclaims for the gangs their quota
// refuses, or explains why it cannot. It is enabled at PodGroupPostFilter by
// name so that it runs before DynamicResources' there: a pod group none of
// whose pods got through PreFilter (no node yet) ends unresolvable at
// CapacityScheduling instead of failing in DynamicResources with an error.
func QuotaProfile() configv1.KubeSchedulerProfile {
	return configv1.KubeSchedulerProfile{
		SchedulerName: ptr.To(corev1.DefaultSchedulerName),
		Plugins: &configv1.Plugins{
			MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: capacityscheduling.Name}}},
			PostFilter: configv1.PluginSet{Disabled: []configv1.Plugin{{Name: "DefaultPreemption"}}},
			PodGroupPostFilter: configv1.PluginSet{
				Enabled:  []configv1.Plugin{{Name: capacityscheduling.Name}},
				Disabled: []configv1.Plugin{{Name: "DefaultPreemption"}},
			},
		},
	}
}

// resolve is the configuration and the registry; CapacityScheduling, unless
// Registry has it, learns from leadership whether its replica leads.
func (o SchedulerOptions) resolve(leadership *capacityscheduling.Leadership) (*configv1.KubeSchedulerConfiguration, frameworkruntime.Registry, error) {
	registry := frameworkruntime.Registry{}
	if err := registry.Merge(o.Registry); err != nil {
		return nil, nil, err
	}
	if _, ok := registry[capacityscheduling.Name]; !ok {
		registry[capacityscheduling.Name] = leadership.Factory()
	}
	cfg := o.Config
	if cfg == nil && !o.WithoutQuota {
		cfg = &configv1.KubeSchedulerConfiguration{Profiles: []configv1.KubeSchedulerProfile{QuotaProfile()}}
	}
	return cfg, registry, nil
}

// schedulerRunner owns one running scheduler, so that tests can stop it and start
// a fresh one (a restart, as after a crash or a rollout).
type schedulerRunner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   <-chan struct{}
	// webhook serves the running scheduler's admission webhook.
	webhook webhookServer
}

// StartScheduler starts the kube-scheduler with opts, stopping a running one first.
// It returns once the scheduler's informers have synced and it is scheduling.
func (c *Cluster) StartScheduler(ctx context.Context, opts SchedulerOptions) error {
	c.StopScheduler()
	c.scheduler.mu.Lock()
	defer c.scheduler.mu.Unlock()

	config := restclient.AddUserAgent(restclient.CopyConfig(c.Config), "kube-scheduler")
	r, err := c.newReplica(ctx, opts, config)
	if err != nil {
		return err
	}

	if r.reviewer != nil {
		c.scheduler.webhook.setReviewer(r.reviewer)
		if err := c.startWebhook(ctx); err != nil {
			r.cancel()
			return err
		}
		if c.scheduler.webhook.available.Load() {
			if err := c.waitForWebhook(ctx); err != nil {
				r.cancel()
				return err
			}
		}
	}
	// The only replica leads, as kube-scheduler without leader election.
	r.leadership.SetLeading(true)
	c.scheduler.cancel, c.scheduler.done = r.cancel, r.run(r.sched.Run)
	return nil
}

// StandbyUserAgent is the user agent of a standby scheduler's requests: the
// API server names it as the manager of whatever the standby writes.
const StandbyUserAgent = "kube-scheduler-standby"

// StartStandbyScheduler starts another kube-scheduler replica beside the
// running one, as a replica that kube-scheduler's leader election has not
// chosen: its plugins are built and its informers and their handlers run, but
// it never schedules nor leads. It serves no webhook. The returned function stops it;
// so does the cluster's end.
func (c *Cluster) StartStandbyScheduler(ctx context.Context, opts SchedulerOptions) (stop func(), err error) {
	config := restclient.CopyConfig(c.Config)
	config.UserAgent = StandbyUserAgent
	r, err := c.newReplica(ctx, opts, config)
	if err != nil {
		return nil, err
	}
	// A standby waits for the lease until it is stopped.
	done := r.run(func(ctx context.Context) { <-ctx.Done() })
	return func() { r.cancel(); <-done }, nil
}

// replica is a built kube-scheduler whose informers and handlers have synced.
type replica struct {
	sched       *scheduler.Scheduler
	factory     informers.SharedInformerFactory
	broadcaster events.EventBroadcaster
	// reviewer judges admission with the replica's plugin; nil without it.
	reviewer webhook.Reviewer
	// leadership tells the replica's CapacityScheduling whether it leads.
	leadership *capacityscheduling.Leadership
	ctx        context.Context
	cancel     context.CancelFunc
}

// newReplica builds a kube-scheduler talking to the API server through config
// and waits until its informers and their handlers have synced.
func (c *Cluster) newReplica(ctx context.Context, opts SchedulerOptions, config *restclient.Config) (*replica, error) {
	r := &replica{leadership: &capacityscheduling.Leadership{}}
	versioned, registry, err := opts.resolve(r.leadership)
	if err != nil {
		return nil, err
	}
	// The admission webhook judges with the plugin this scheduler builds.
	newPlugin := registry[capacityscheduling.Name]
	registry[capacityscheduling.Name] = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := newPlugin(ctx, obj, h)
		if rv, ok := p.(webhook.Reviewer); ok && err == nil {
			r.reviewer = rv
		}
		return p, err
	}
	// Defaulted and converted by the one implementation, the simulation's.
	cfg, err := simulator.DefaultSchedulerConfig(versioned)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("scheduler client: %w", err)
	}
	dynClient, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("scheduler dynamic client: %w", err)
	}
	r.ctx, r.cancel = context.WithCancel(c.background)
	r.factory = scheduler.NewInformerFactory(client, 0, nil)
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, corev1.NamespaceAll, nil)
	r.broadcaster = events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	r.sched, err = scheduler.New(r.ctx, client, r.factory, dynFactory, profile.NewRecorderFactory(r.broadcaster),
		scheduler.WithKubeConfig(config),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithFrameworkOutOfTreeRegistry(registry),
		scheduler.WithParallelism(cfg.Parallelism),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
	)
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("creating kube-scheduler: %w", err)
	}
	r.broadcaster.StartRecordingToSink(r.ctx.Done())
	r.factory.Start(r.ctx.Done())
	dynFactory.Start(r.ctx.Done())
	r.factory.WaitForCacheSync(ctx.Done())
	dynFactory.WaitForCacheSync(ctx.Done())
	// Plugins rebuild state (quota usage) in their informer handlers; like the
	// kube-scheduler binary, wait until those saw every object once.
	if err := r.sched.WaitForHandlersSync(ctx); err != nil {
		r.cancel()
		return nil, fmt.Errorf("waiting for the scheduler's event handlers: %w", err)
	}
	return r, nil
}

// run runs the replica with work until it is cancelled, then shuts it down;
// the returned channel is closed once it has.
func (r *replica) run(work func(context.Context)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		work(r.ctx)
		r.broadcaster.Shutdown()
		r.factory.Shutdown()
	}()
	return done
}

// StopScheduler stops the running scheduler, if any, and waits until it stopped.
func (c *Cluster) StopScheduler() {
	c.scheduler.mu.Lock()
	defer c.scheduler.mu.Unlock()
	if c.scheduler.cancel == nil {
		return
	}
	c.scheduler.webhook.setReviewer(nil)
	c.scheduler.cancel()
	<-c.scheduler.done
	c.scheduler.cancel, c.scheduler.done = nil, nil
}
