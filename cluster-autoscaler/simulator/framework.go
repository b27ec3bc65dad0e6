// Package simulator runs the kube-scheduler's own PreFilter and Filter plugins
// in-process against a snapshot of the cluster plus template nodes, so that the
// autoscaler predicts placement exactly as the scheduler decides it: no hand-made
// predicate subset.
package simulator

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	feature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// LoadSchedulerConfig reads a KubeSchedulerConfiguration file, as
// --scheduler-config-file names it, or returns the upstream default when path is
// empty.
func LoadSchedulerConfig(path string) (*schedulerapi.KubeSchedulerConfiguration, error) {
	if path == "" {
		return DefaultSchedulerConfig(nil)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scheduler config %s: %w", path, err)
	}
	obj, gvk, err := schedulerscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding scheduler config %s: %w", path, err)
	}
	cfg, ok := obj.(*schedulerapi.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("scheduler config %s holds a %s, not a KubeSchedulerConfiguration", path, gvk)
	}
	return cfg, nil
}

// DefaultSchedulerConfig defaults and converts a versioned configuration; nil
// means the upstream default profile.
func DefaultSchedulerConfig(versioned *configv1.KubeSchedulerConfiguration) (*schedulerapi.KubeSchedulerConfiguration, error) {
	if versioned == nil {
		versioned = &configv1.KubeSchedulerConfiguration{}
	} else {
		versioned = versioned.DeepCopy()
	}
	schedulerscheme.Scheme.Default(versioned)
	cfg := &schedulerapi.KubeSchedulerConfiguration{}
	if err := schedulerscheme.Scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, fmt.Errorf("converting the scheduler configuration: %w", err)
	}
	return cfg, nil
}

// FrameworkOptions build the simulation framework.
type FrameworkOptions struct {
	// Config's profiles are simulated each for the pods whose schedulerName
	// names it; the first serves pods of any other scheduler.
	Config *schedulerapi.KubeSchedulerConfiguration
	// Registry adds out-of-tree plugins to the in-tree ones.
	Registry frameworkruntime.Registry
	// Client, KubeConfig and Informers are what plugins may read; the informer
	// factory must be started by the caller after NewFramework.
	Client     kubernetes.Interface
	KubeConfig *restclient.Config
	Informers  informers.SharedInformerFactory
	// CSINodeAware lets the plugins read CSINode objects, so that CSI volume
	// attach limits count (upstream's --enable-csi-node-aware-scheduling).
	CSINodeAware bool
	// LogOffset is added to the verbosity of every line the plugins log, so
	// that they log only up to upstream's --scheduler-verbosity.
	LogOffset int
	// PlacementAwarePlugins name the out-of-tree PreFilter plugins that
	// implement the AddPod extension, so that their state follows simulated
	// placements as the in-tree ones' does.
	PlacementAwarePlugins []string
}

// Framework is a scheduler framework whose snapshot the caller replaces once per
// loop.
type Framework struct {
	// profiles by schedulerName; first serves pods of a scheduler no profile
	// names.
	profiles map[string]*profile
	first    *profile
	snapshot *swappableSnapshot
}

// profile is one scheduler profile's plugins.
type profile struct {
	framework.Framework
	// enabledPreFilter are the profile's PreFilter plugins; placementAware
	// those among them whose state follows placed pods.
	enabledPreFilter sets.Set[string]
	placementAware   []string
	// filters are the profile's Filter plugins.
	filters []string
	// logOffset lowers the verbosity of every line the plugins log.
	logOffset int
	// dra is the profile's DynamicResources plugin, nil when it has none;
	// snapshot is the framework's, whose DRA state the plugin reads.
	dra      draPlugin
	snapshot *swappableSnapshot
}

// draPlugin is what the simulation runs of the DynamicResources plugin
// besides PreFilter and Filter: Reserve, where the plugin hands over the
// devices it allocated (see claimTracker).
type draPlugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
	fwk.ReservePlugin
}

// profileFor is the profile a pod's schedulerName names, as the scheduler
// picks it.
func (f *Framework) profileFor(pod *corev1.Pod) *profile {
	if p, ok := f.profiles[pod.Spec.SchedulerName]; ok {
		return p
	}
	return f.first
}

// NewFramework instantiates the profile's plugins over a snapshot the caller sets
// with SetSnapshot.
func NewFramework(ctx context.Context, opts FrameworkOptions) (*Framework, error) {
	if opts.Config == nil || len(opts.Config.Profiles) == 0 {
		return nil, fmt.Errorf("the scheduler configuration has no profile to simulate")
	}
	// The framework records plugin metrics into the scheduler's metric vectors,
	// which exist only once registered; registration is idempotent.
	schedulermetrics.Register()
	registry := plugins.NewInTreeRegistry()
	if err := registry.Merge(opts.Registry); err != nil {
		return nil, fmt.Errorf("registering plugins: %w", err)
	}
	// The DynamicResources plugin of the profile being built, as its
	// factory makes it: the simulation runs its Reserve after a placement.
	var built draPlugin
	if factory, ok := registry[names.DynamicResources]; ok {
		registry[names.DynamicResources] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			pl, err := factory(ctx, args, h)
			if p, ok := pl.(draPlugin); ok && err == nil {
				built = p
			}
			return pl, err
		}
	}
	snapshot := &swappableSnapshot{}
	snapshot.set(newEmptySnapshot())
	frameworkOpts := []frameworkruntime.Option{
		frameworkruntime.WithClientSet(opts.Client),
		frameworkruntime.WithKubeConfig(opts.KubeConfig),
		frameworkruntime.WithInformerFactory(opts.Informers),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(csiNodes(opts))),
		frameworkruntime.WithParallelism(1),
		// With GenericWorkload on, DefaultPreemption and GangScheduling take the
		// pod group manager when they are built, and a nil one crashes them.
		// They read it only at PreEnqueue, Permit and PostFilter, which the
		// simulation does not run: an empty one serves.
		frameworkruntime.WithPodGroupManager(newEmptySnapshot().base),
	}
	if feature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		dra, err := newDRAManager(ctx, opts)
		if err != nil {
			return nil, err
		}
		frameworkOpts = append(frameworkOpts, frameworkruntime.WithSharedDRAManager(simulatedDRA{live: dra, snapshot: snapshot}))
	}
	out := &Framework{profiles: map[string]*profile{}, snapshot: snapshot}
	for i := range opts.Config.Profiles {
		cfg := &opts.Config.Profiles[i]
		built = nil
		fw, err := frameworkruntime.NewFramework(ctx, registry, cfg, frameworkOpts...)
		if err != nil {
			return nil, fmt.Errorf("building the simulation framework for profile %q: %w", cfg.SchedulerName, err)
		}
		p := &profile{Framework: fw, enabledPreFilter: sets.New[string](), logOffset: opts.LogOffset, dra: built, snapshot: snapshot}
		if plugins := fw.ListPlugins(); plugins != nil {
			for _, pl := range plugins.PreFilter.Enabled {
				p.enabledPreFilter.Insert(pl.Name)
			}
			for _, pl := range plugins.Filter.Enabled {
				p.filters = append(p.filters, pl.Name)
			}
		}
		for _, name := range append(append([]string(nil), placementAware...), opts.PlacementAwarePlugins...) {
			if p.enabledPreFilter.Has(name) {
				p.placementAware = append(p.placementAware, name)
			}
		}
		out.profiles[cfg.SchedulerName] = p
		if out.first == nil {
			out.first = p
		}
	}
	return out, nil
}

// csiNodes are the CSINodes the plugins see: the cluster's, or none, as
// upstream's simulation without CSINode awareness.
func csiNodes(opts FrameworkOptions) storagelisters.CSINodeLister {
	if opts.CSINodeAware {
		return opts.Informers.Storage().V1().CSINodes().Lister()
	}
	return storagelisters.NewCSINodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
}

// pluginContext is ctx with its logger lowered by the log offset.
func (p *profile) pluginContext(ctx context.Context) context.Context {
	if p.logOffset == 0 {
		return ctx
	}
	return klog.NewContext(ctx, klog.FromContext(ctx).V(p.logOffset))
}

// newDRAManager gives the DynamicResources plugin the claims and slices it reads,
// wired the way the scheduler wires its own.
func newDRAManager(ctx context.Context, opts FrameworkOptions) (fwk.SharedDRAManager, error) {
	logger := klog.FromContext(ctx)
	claims := assumecache.NewAssumeCache(logger, opts.Informers.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	trackerOpts := resourceslicetracker.Options{
		EnableDeviceTaintRules:   feature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
		EnableConsumableCapacity: feature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
		SliceInformer:            opts.Informers.Resource().V1().ResourceSlices(),
		KubeClient:               opts.Client,
	}
	if trackerOpts.EnableDeviceTaintRules {
		trackerOpts.TaintInformer = opts.Informers.Resource().V1().DeviceTaintRules()
	}
	slices, err := resourceslicetracker.StartTracker(ctx, trackerOpts)
	if err != nil {
		return nil, fmt.Errorf("starting the resource slice tracker: %w", err)
	}
	return dynamicresources.NewDRAManager(ctx, claims, slices, opts.Informers), nil
}

// SetSnapshot makes s the cluster every later check sees.
func (f *Framework) SetSnapshot(s *Snapshot) { f.snapshot.set(s) }

// swappableSnapshot lets one framework, built once, read a new snapshot every
// loop: plugins keep the lister and the DRA manager they were given at
// construction.
type swappableSnapshot struct {
	fwk.MutableSnapshotSharedLister
	current *Snapshot
}

func (s *swappableSnapshot) set(inner *Snapshot) {
	s.MutableSnapshotSharedLister = lister{inner}
	s.current = inner
}
