// Package app wires the autoscaler together from its options: clients and
// informers, the cloud provider, the scheduling simulation, the expander chain and
// the processors. The binary and the in-process tests build it the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	statusapi "github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/core"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/pkg/typedinformer"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/processors/capacityquota"
	"github.com/quotascale/quotascale/processors/elasticquota"
	"github.com/quotascale/quotascale/processors/status"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// Component is the name events and leases are recorded under, as upstream.
const Component = "cluster-autoscaler"

// evictionRetryInterval is the wait between attempts to evict a pod, as
// upstream's.
const evictionRetryInterval = 10 * time.Second

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

// New builds an autoscaler against the cluster config reaches. ctx bounds every
// component; cancel it on shutdown.
func New(ctx context.Context, opts config.Options, restConfig *restclient.Config, process *Process) (*Autoscaler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	restConfig = restclient.AddUserAgent(restclient.CopyConfig(restConfig), Component)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if err := requireCRDs(client, opts); err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	provider, err := newProvider(ctx, opts, client, restConfig, nodes.Lister())
	if err != nil {
		return nil, err
	}
	pods := factory.Core().V1().Pods()
	// The priority expander's ConfigMap lives in the autoscaler's namespace; watch
	// only that namespace's ConfigMaps.
	nsFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace))
	configMaps := nsFactory.Core().V1().ConfigMaps().Lister().ConfigMaps(opts.Namespace)

	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	schedulerConfig, err := simulationConfig(opts)
	if err != nil {
		return nil, err
	}
	fw, err := simulator.NewFramework(ctx, simulator.FrameworkOptions{
		Config: schedulerConfig, Client: client, KubeConfig: restConfig, Informers: factory,
		Registry:     frameworkruntime.Registry{capacityscheduling.Name: capacityscheduling.New},
		CSINodeAware: opts.CSINodeAwareScheduling, LogOffset: opts.SchedulerLogOffset,
	})
	if err != nil {
		return nil, err
	}
	strategy, err := expander.New(ctx, opts.Expander, expander.Deps{PriorityConfig: expander.PriorityConfigFromLister(configMaps)})
	if err != nil {
		return nil, fmt.Errorf("--expander: %w", err)
	}
	broadcaster := newEventBroadcaster(ctx, opts)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})
	go func() { <-ctx.Done(); broadcaster.Shutdown() }()

	m := process.Metrics
	quotaInformer := typedinformer.New[autoscalingv1beta1.CapacityQuota](dyn, capacityquota.Resource, 0)
	quotas, err := capacityquota.New(capacityquota.Options{
		Enabled:     opts.CapacityQuotasEnabled,
		ClusterWide: clusterWideLimits(opts),
	}, capacityquota.ListerFrom(quotaInformer.GetStore()), nodes.Informer(), recorder, process.quotaMetrics)
	if err != nil {
		return nil, err
	}
	visibility, err := openVisibilityLog(ctx, opts.VisibilityLogFile)
	if err != nil {
		return nil, err
	}
	var podListProcessors []processors.PodListProcessor
	var treeInformer cache.SharedIndexInformer
	var rootMin func() corev1.ResourceList
	if opts.ElasticQuotaEnabled {
		treeInformer = typedinformer.New[schedulingv1beta1.ElasticQuotaTree](dyn, elasticquota.Resource, 0)
		trees := elasticquota.New(treeInformer.GetStore(), pods.Lister(), opts.ElasticQuotaSchedulerNames)
		podListProcessors = append(podListProcessors, trees)
		rootMin = trees.RootMin
	}
	events := &status.EventProcessor{Recorder: recorder}
	drainPriorities, err := opts.DrainPriorities()
	if err != nil {
		return nil, err
	}
	deps := core.Deps{
		PodListProcessors: podListProcessors,
		Provider:          provider,
		Nodes:             nodes.Lister(),
		Pods:              pods.Lister(),
		DaemonSets:        factory.Apps().V1().DaemonSets().Lister(),
		Framework:         fw,
		Expander:          strategy,
		Metrics:           m,
		Limiters:          []processors.ScaleUpLimiter{quotas},
		StatusProcessors:  []processors.ScaleUpStatusProcessor{events, visibility},
		AfterLoop:         []func(context.Context) error{(&capacityquota.StatusWriter{Client: dyn, Processor: quotas}).Write},
		ScaleDownPlanner: scaledown.NewPlanner(scaledown.Options{
			Enabled:                           opts.ScaleDownEnabled,
			UtilizationThreshold:              opts.ScaleDownUtilizationThreshold,
			UnneededTime:                      opts.ScaleDownUnneededTime,
			DelayAfterAdd:                     opts.ScaleDownDelayAfterAdd,
			DelayAfterFailure:                 opts.ScaleDownDelayAfterFailure,
			MaxEmptyBulkDelete:                opts.MaxEmptyBulkDelete,
			MaxGracefulTermination:            time.Duration(opts.MaxGracefulTerminationSec) * time.Second,
			SkipNodesWithLocalStorage:         opts.SkipNodesWithLocalStorage,
			SkipNodesWithSystemPods:           opts.SkipNodesWithSystemPods,
			ExpendablePodsPriorityCutoff:      opts.ExpendablePodsPriorityCutoff,
			SkipNodesWithCustomControllerPods: opts.SkipNodesWithCustomControllerPods,
			IgnoreDaemonSetsUtilization:       opts.IgnoreDaemonSetsUtilization,
			MinReplicaCount:                   opts.MinReplicaCount,
			UnreadyEnabled:                    opts.ScaleDownUnreadyEnabled,
			UnreadyTime:                       opts.ScaleDownUnreadyTime,
			NonEmptyCandidates:                opts.ScaleDownNonEmptyCandidatesCount,
			MaxParallelism:                    opts.MaxScaleDownParallelism,
			MaxDrainParallelism:               opts.MaxDrainParallelism,
			MinCores:                          opts.MinCoresTotal,
			MinMemory:                         opts.MinMemoryTotal,
			GPUUtilizationThreshold:           opts.ScaleDownGPUUtilizationThreshold,
			IgnoreMirrorPodsUtilization:       opts.IgnoreMirrorPodsUtilization,
			BlockingSystemPodTimeout:          opts.BlockingSystemPodDisruptionTimeout,
			UnremovableRecheckTimeout:         opts.UnremovableNodeRecheckTimeout,
			SimulationTimeout:                 opts.ScaleDownSimulationTimeout,
			DeletionCandidateTTL:              opts.NodeDeletionCandidateTTL,
		}, fw),
		ScaleDownActuator: &scaledown.Actuator{Client: client, Provider: provider,
			MaxGracefulTermination:         time.Duration(opts.MaxGracefulTerminationSec) * time.Second,
			DrainPriority:                  drainPriorities,
			CordonNode:                     opts.CordonNodeBeforeTerminating,
			MaxPodEvictionTime:             opts.MaxPodEvictionTime,
			EvictionRetryInterval:          evictionRetryInterval,
			DeleteDelayAfterTaint:          opts.NodeDeleteDelayAfterTaint,
			DynamicDeleteDelay:             opts.DynamicNodeDeleteDelayAfterTaint,
			Evicted:                        m.RegisterEvictions,
			BatchInterval:                  opts.NodeDeletionBatcherInterval,
			DelayDeletionTimeout:           opts.NodeDeletionDelayTimeout,
			EvictDaemonSetPodsFromEmpty:    opts.DaemonSetEvictionForEmptyNodes,
			EvictDaemonSetPodsFromOccupied: opts.DaemonSetEvictionForOccupiedNodes,
		},
		ScaleDownStatusProcessors: []processors.ScaleDownStatusProcessor{events, visibility},
		PDBs:                      factory.Policy().V1().PodDisruptionBudgets().Lister(),
		Controllers: &scaledown.Controllers{ReplicaSets: factory.Apps().V1().ReplicaSets().Lister(),
			ReplicationControllers: factory.Core().V1().ReplicationControllers().Lister()},
		RootMin: rootMin,
	}
	if opts.WriteStatusConfigMap {
		// Events about the autoscaler itself go on its status ConfigMap, as
		// upstream's, once it has been written.
		var statusObject *corev1.ConfigMap
		deps.WriteStatus = func(ctx context.Context, s statusapi.Status, now time.Time) error {
			cm, err := clusterstate.WriteStatusConfigMap(ctx, client, opts.Namespace, opts.StatusConfigMapName, s, now)
			if err == nil {
				statusObject = cm
			}
			return err
		}
		deps.Event = func(eventType, reason, message string) {
			if statusObject != nil {
				recorder.Event(statusObject, eventType, reason, message)
			}
		}
	}
	unschedulable, err := watchUnschedulable(pods.Informer())
	if err != nil {
		return nil, fmt.Errorf("watching for unschedulable pods: %w", err)
	}
	a := &Autoscaler{Process: process, opts: opts, core: core.New(opts, deps), provider: provider,
		fresh: &freshness{client: client, bound: opts.StaleDataBound}, rootMin: rootMin, unschedulable: unschedulable}
	go quotaInformer.RunWithContext(ctx)
	synced := []cache.InformerSynced{quotaInformer.HasSynced}
	if treeInformer != nil {
		go treeInformer.RunWithContext(ctx)
		synced = append(synced, treeInformer.HasSynced)
	}
	// As upstream's, the informers have until ctx ends to sync: an API
	// server away for a while (an outage, a take-over during one) delays the
	// start, it does not fail it. Only ctx ending does, and the error says so
	// (wraps ctx's error), so that a caller tells losing the lease or being
	// stopped from a failure.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("the CapacityQuota and ElasticQuotaTree informers did not sync: %w", ctx.Err())
	}
	for _, f := range []informers.SharedInformerFactory{factory, nsFactory} {
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return nil, fmt.Errorf("informer for %v did not sync: %w", typ, ctx.Err())
			}
		}
	}
	return a, nil
}

func newProvider(ctx context.Context, opts config.Options, client kubernetes.Interface, restConfig *restclient.Config,
	nodes corelisters.NodeLister) (cloudprovider.CloudProvider, error) {
	switch opts.CloudProviderName {
	case kwok.ProviderName:
		source, err := kwok.ParseSourceRef(opts.CloudConfig, client)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config: %w", err)
		}
		ns, name, _ := strings.Cut(opts.KwokState, "/")
		return kwok.NewProvider(ctx, kwok.Options{Client: client, Config: source, StateNamespace: ns, StateName: name})
	case clusterapi.ProviderName:
		management, err := managementConfig(opts, restConfig)
		if err != nil {
			return nil, err
		}
		dyn, err := dynamic.NewForConfig(management)
		if err != nil {
			return nil, fmt.Errorf("management cluster dynamic client: %w", err)
		}
		disc, err := discovery.NewDiscoveryClientForConfig(management)
		if err != nil {
			return nil, fmt.Errorf("management cluster discovery client: %w", err)
		}
		return clusterapi.NewProvider(ctx, clusterapi.Options{
			Client: dyn, Discovery: disc, Nodes: nodes,
			AutoDiscovery: opts.NodeGroupAutoDiscovery,
			// Upstream's environment variable pinning the Cluster API version.
			APIVersion: os.Getenv("CAPI_VERSION"),
		})
	}
	return nil, fmt.Errorf("--cloud-provider %q is not supported", opts.CloudProviderName)
}

// managementConfig reaches the Cluster API management cluster the way
// upstream's clusterapi provider does: --cloud-config is its kubeconfig;
// without it, the workload cluster's config (--kubeconfig, or in-cluster) is
// used, unless --clusterapi-cloud-config-authoritative, which means the
// in-cluster config.
func managementConfig(opts config.Options, workload *restclient.Config) (*restclient.Config, error) {
	var config *restclient.Config
	var err error
	switch {
	case opts.CloudConfig != "":
		config, err = clientcmd.BuildConfigFromFlags("", opts.CloudConfig)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config %s: the management cluster kubeconfig: %w", opts.CloudConfig, err)
		}
	case opts.ClusterAPICloudConfigAuthoritative:
		config, err = restclient.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--clusterapi-cloud-config-authoritative without --cloud-config means the in-cluster config for the management cluster: %w", err)
		}
	default:
		return workload, nil
	}
	// Upstream applies --kube-client-qps and --kube-client-burst to both.
	config.QPS, config.Burst = workload.QPS, workload.Burst
	return restclient.AddUserAgent(config, Component), nil
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

// clusterWideLimits are --cores-total, --memory-total and --max-nodes-total as
// the limits of the "cluster-wide" quota.
func clusterWideLimits(opts config.Options) autoscalingv1beta1.ResourceList {
	limits := autoscalingv1beta1.ResourceList{
		autoscalingv1beta1.ResourceCPU:    *resource.NewQuantity(opts.MaxCoresTotal, resource.DecimalSI),
		autoscalingv1beta1.ResourceMemory: *resource.NewQuantity(opts.MaxMemoryTotal, resource.BinarySI),
	}
	if opts.MaxNodesTotal > 0 {
		limits[autoscalingv1beta1.ResourceNodes] = *resource.NewQuantity(int64(opts.MaxNodesTotal), resource.DecimalSI)
	}
	return limits
}

// openVisibilityLog appends to path, or writes to stdout when path is empty; the
// file is closed when ctx ends.
func openVisibilityLog(ctx context.Context, path string) (*status.VisibilityLog, error) {
	if path == "" {
		return status.NewVisibilityLog(os.Stdout), nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--visibility-log-file: %w", err)
	}
	go func() { <-ctx.Done(); _ = f.Close() }()
	return status.NewVisibilityLog(f), nil
}

// simulationConfig is the scheduler configuration the scale-up simulation runs:
// --scheduler-config-file, or upstream's default profile plus, when elastic
// quota is on, one profile with CapacityScheduling for each scheduler of
// --elastic-quota-scheduler-names (default-scheduler's own profile when it is
// one of them), so that a quota pod's ResourceFlavor steers the simulation to
// the node groups it may use while other pods are simulated as the stock
// scheduler places them. The plugin reports nothing from here: the scheduler
// owns tree status and events.
func simulationConfig(opts config.Options) (*schedulerapi.KubeSchedulerConfiguration, error) {
	if opts.SchedulerConfigFile != "" || !opts.ElasticQuotaEnabled {
		return simulator.LoadSchedulerConfig(opts.SchedulerConfigFile)
	}
	quota := func(name string) configv1.KubeSchedulerProfile {
		return configv1.KubeSchedulerProfile{
			SchedulerName: ptr.To(name),
			Plugins: &configv1.Plugins{
				MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: capacityscheduling.Name}}},
			},
			PluginConfig: []configv1.PluginConfig{{
				Name: capacityscheduling.Name,
				Args: runtime.RawExtension{Raw: []byte(`{"writeStatus":false}`)},
			}},
		}
	}
	profiles := []configv1.KubeSchedulerProfile{{SchedulerName: ptr.To(corev1.DefaultSchedulerName)}}
	for _, name := range opts.ElasticQuotaSchedulerNames {
		if name == corev1.DefaultSchedulerName {
			profiles[0] = quota(name)
			continue
		}
		profiles = append(profiles, quota(name))
	}
	return simulator.DefaultSchedulerConfig(&configv1.KubeSchedulerConfiguration{Profiles: profiles})
}

// requireCRDs fails fast, naming the missing CRD, when an API the autoscaler
// watches is not served: its informer would otherwise wait forever while the
// process looks healthy.
func requireCRDs(client kubernetes.Interface, opts config.Options) error {
	type api struct {
		groupVersion, resource, crd string
	}
	needed := []api{{autoscalingv1beta1.SchemeGroupVersion.String(), "capacityquotas", "capacityquotas.autoscaling.x-k8s.io"}}
	if opts.ElasticQuotaEnabled {
		needed = append(needed,
			api{schedulingv1beta1.SchemeGroupVersion.String(), "elasticquotatrees", "elasticquotatrees.scheduling.sigs.k8s.io"},
			api{kueuev1beta1.SchemeGroupVersion.String(), "resourceflavors", "resourceflavors.kueue.x-k8s.io"})
	}
	for _, a := range needed {
		list, err := client.Discovery().ServerResourcesForGroupVersion(a.groupVersion)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("discovering %s: %w", a.groupVersion, err)
		}
		found := false
		if list != nil {
			for _, r := range list.APIResources {
				found = found || r.Name == a.resource
			}
		}
		if !found {
			hint := ""
			if a.resource != "capacityquotas" {
				hint = ", or run with --elastic-quota-enabled=false"
			}
			return fmt.Errorf("the API server does not serve %s (%s): install the CRD%s", a.resource, a.crd, hint)
		}
	}
	return nil
}
