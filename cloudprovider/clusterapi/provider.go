// Package clusterapi is the cloud provider for clusters whose machines Cluster
// API manages, with upstream's annotations, flags and behaviour. A
// MachineDeployment, a MachineSet that no MachineDeployment owns, or a
// MachinePool is a node group when it carries upstream's min and max size
// annotations and matches --node-group-auto-discovery. The provider watches
// the Cluster API objects of the management cluster through shared informers,
// scales groups through the scale subresource only, marks the machines it
// wants gone with Cluster API's delete-machine annotation before lowering the
// replicas, and builds scale-from-zero templates from the infrastructure
// machine template's status, upstream's capacity annotations and the group's
// existing nodes. It reads objects as unstructured, so it needs no Cluster API
// Go types.
package clusterapi

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
)

// ProviderName is the provider's --cloud-provider name.
const ProviderName = "clusterapi"

// FieldManager names the provider's writes in managedFields.
const FieldManager = "quotascale-cluster-autoscaler"

// Options configure a Provider.
type Options struct {
	// Client reaches the management cluster, where the Cluster API objects are.
	Client dynamic.Interface
	// Discovery of the management cluster finds the served version of
	// cluster.x-k8s.io, whether MachineDeployments and MachinePools are
	// served, and the resources of infrastructure machine templates. Nil
	// means APIVersion (or DefaultAPIVersion), every kind served and no
	// infrastructure templates.
	Discovery discovery.DiscoveryInterface
	// APIVersion pins the version of cluster.x-k8s.io, as upstream's
	// CAPI_VERSION does; empty means the group's preferred version.
	APIVersion string
	// AutoDiscovery are the --node-group-auto-discovery specs
	// (clusterapi:namespace=NS,clusterName=NAME,KEY=VALUE); none means every
	// annotated scalable resource of every namespace.
	AutoDiscovery []string
	// Nodes lists the workload cluster's nodes: a group's existing node is
	// the most faithful template of its next one. Nil means none is used.
	Nodes corelisters.NodeLister
	// SyncTimeout bounds the wait for the informers' first list; 0 means a
	// minute.
	SyncTimeout time.Duration
}

// Provider implements cloudprovider.CloudProvider on Cluster API. Refresh
// takes a snapshot of the informers' caches, which NodeGroups and the groups
// answer from; the scaling calls go to the API server.
type Provider struct {
	// ctx bounds the API calls of the NodeGroup methods, which take no
	// context, and the informers.
	ctx       context.Context
	cancel    context.CancelFunc
	client    dynamic.Interface
	gvr       map[string]schema.GroupVersionResource // by kind
	specs     []discoverySpec
	nodes     corelisters.NodeLister
	informers *watchers

	mu   sync.Mutex
	snap *snapshot
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// snapshot is what one Refresh saw.
type snapshot struct {
	groups       []*nodeGroup // sorted by Id
	machines     map[types.NamespacedName]*unstructured.Unstructured
	byProviderID map[string]types.NamespacedName
	byName       map[string][]types.NamespacedName // machine name -> keys, for nodes without a namespace annotation
	groupOf      map[types.NamespacedName]*nodeGroup
	// poolOf maps the provider IDs a MachinePool lists to it.
	poolOf map[string]*nodeGroup
}

// NewProvider starts the informers and takes a first snapshot. ctx bounds
// the informers and every API call the provider makes later: cancel it, or
// call Cleanup, only on shutdown.
func NewProvider(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("clusterapi: Options.Client is required")
	}
	specs, err := parseAutoDiscovery(opts.AutoDiscovery)
	if err != nil {
		return nil, err
	}
	version, served, err := servedKinds(opts.Discovery, opts.APIVersion)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Provider{ctx: ctx, cancel: cancel, client: opts.Client, specs: specs, nodes: opts.Nodes, gvr: map[string]schema.GroupVersionResource{}}
	for kind, resource := range map[string]string{
		kindMachineDeployment: "machinedeployments", kindMachineSet: "machinesets",
		kindMachinePool: "machinepools", kindMachine: "machines",
	} {
		if served[resource] {
			p.gvr[kind] = schema.GroupVersionResource{Group: APIGroup, Version: version, Resource: resource}
		}
	}
	for _, required := range []string{kindMachineSet, kindMachine} {
		if _, ok := p.gvr[required]; !ok {
			cancel()
			return nil, fmt.Errorf("clusterapi: the management cluster does not serve %ss of %s/%s", required, APIGroup, version)
		}
	}
	timeout := opts.SyncTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	p.informers, err = startInformers(ctx, opts.Client, opts.Discovery, watchNamespace(specs), p.gvr, timeout)
	if err != nil {
		cancel()
		return nil, err
	}
	klog.FromContext(ctx).V(1).Info("Watching Cluster API objects", "cloudProvider", ProviderName, "version", version,
		"machinePools", p.gvr[kindMachinePool].Resource != "", "namespace", watchNamespace(specs))
	if err := p.Refresh(); err != nil {
		cancel()
		return nil, err
	}
	return p, nil
}

// servedKinds is the version of cluster.x-k8s.io to use and the resources it
// serves.
func servedKinds(d discovery.DiscoveryInterface, pinned string) (string, map[string]bool, error) {
	all := map[string]bool{"machinedeployments": true, "machinesets": true, "machinepools": true, "machines": true}
	if d == nil {
		if pinned == "" {
			pinned = DefaultAPIVersion
		}
		return pinned, all, nil
	}
	version := pinned
	if version == "" {
		groups, err := d.ServerGroups()
		if err != nil {
			return "", nil, fmt.Errorf("clusterapi: discovering the API groups of the management cluster: %w", err)
		}
		for _, g := range groups.Groups {
			if g.Name == APIGroup {
				version = g.PreferredVersion.Version
			}
		}
		if version == "" {
			return "", nil, fmt.Errorf("clusterapi: the management cluster does not serve %s: install Cluster API there, or point --cloud-config at the management cluster", APIGroup)
		}
	}
	list, err := d.ServerResourcesForGroupVersion(APIGroup + "/" + version)
	if err != nil {
		return "", nil, fmt.Errorf("clusterapi: discovering %s/%s: %w", APIGroup, version, err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	return version, served, nil
}

func (p *Provider) Name() string { return ProviderName }

// NodeGroups returns the groups of the last Refresh, sorted by Id.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	snap := p.snapshot()
	out := make([]cloudprovider.NodeGroup, 0, len(snap.groups))
	for _, g := range snap.groups {
		out = append(out, g)
	}
	return out
}

// NodeGroupForNode finds the node's machine (by Cluster API's node annotations,
// then by provider ID) and the group that owns it, or the MachinePool that
// lists the node's provider ID. Nodes without one, and machines in no group
// (control plane machines, groups without the size annotations or left out by
// auto-discovery), have none.
func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	snap := p.snapshot()
	if k, ok := snap.machineForNode(node); ok {
		if g := snap.groupOf[k]; g != nil {
			return g, nil
		}
	}
	if g := snap.poolOf[node.Spec.ProviderID]; g != nil && node.Spec.ProviderID != "" {
		return g, nil
	}
	return nil, nil
}

func (s *snapshot) machineForNode(node *corev1.Node) (types.NamespacedName, bool) {
	if name := node.Annotations[MachineAnnotation]; name != "" {
		if ns := node.Annotations[ClusterNamespaceAnnotation]; ns != "" {
			k := types.NamespacedName{Namespace: ns, Name: name}
			if _, ok := s.machines[k]; ok {
				return k, true
			}
		} else if keys := s.byName[name]; len(keys) == 1 {
			return keys[0], true
		}
	}
	if k, ok := s.byProviderID[node.Spec.ProviderID]; ok && node.Spec.ProviderID != "" {
		return k, true
	}
	if k, ok := parsePendingID(node.Spec.ProviderID); ok {
		if _, found := s.machines[k]; found {
			return k, true
		}
	}
	return types.NamespacedName{}, false
}

// GetResourceLimiter returns no limits of its own.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return cloudprovider.NewResourceLimiter(nil, nil), nil
}

// Cleanup stops the informers.
func (p *Provider) Cleanup() error {
	p.cancel()
	return nil
}

func (p *Provider) snapshot() *snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap
}

func (p *Provider) resource(kind, namespace string) dynamic.ResourceInterface {
	return p.client.Resource(p.gvr[kind]).Namespace(namespace)
}

// Refresh rebuilds the groups from the informers' caches; it makes no API
// call. A group whose size annotations are invalid is left out and logged;
// the rest still scale.
func (p *Provider) Refresh() error {
	logger := klog.FromContext(p.ctx).WithValues("cloudProvider", ProviderName)
	snap := &snapshot{
		machines:     map[types.NamespacedName]*unstructured.Unstructured{},
		byProviderID: map[string]types.NamespacedName{},
		byName:       map[string][]types.NamespacedName{},
		groupOf:      map[types.NamespacedName]*nodeGroup{},
		poolOf:       map[string]*nodeGroup{},
	}
	groups := map[string]*nodeGroup{} // by Id
	addGroup := func(kind string, obj *unstructured.Unstructured) {
		g, err := p.newNodeGroup(kind, obj)
		if err != nil {
			logger.Error(err, "Ignoring a node group with invalid size annotations")
			return
		}
		if g != nil {
			groups[g.Id()] = g
		}
	}
	for _, kind := range []string{kindMachineDeployment, kindMachineSet, kindMachinePool} {
		for _, obj := range p.informers.list(kind) {
			// A MachineDeployment's sets scale with it, never on their own.
			if kind == kindMachineSet && owner(obj, kindMachineDeployment) != "" {
				continue
			}
			if allowed(p.specs, obj) {
				addGroup(kind, obj)
			}
		}
	}
	for _, m := range p.informers.list(kindMachine) {
		m = p.withInfrastructureProviderID(m)
		k := key(m)
		snap.machines[k] = m
		snap.byName[k.Name] = append(snap.byName[k.Name], k)
		if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" {
			snap.byProviderID[id] = k
		}
		var g *nodeGroup
		switch labels := m.GetLabels(); {
		case labels[DeploymentNameLabel] != "":
			g = groups[groupID(kindMachineDeployment, k.Namespace, labels[DeploymentNameLabel])]
		case owner(m, kindMachineSet) != "":
			g = groups[groupID(kindMachineSet, k.Namespace, owner(m, kindMachineSet))]
		case labels[SetNameLabel] != "":
			g = groups[groupID(kindMachineSet, k.Namespace, labels[SetNameLabel])]
		case owner(m, kindMachinePool) != "":
			g = groups[groupID(kindMachinePool, k.Namespace, owner(m, kindMachinePool))]
		case labels[PoolNameLabel] != "":
			g = groups[groupID(kindMachinePool, k.Namespace, labels[PoolNameLabel])]
		}
		if g != nil {
			g.machines = append(g.machines, m)
			snap.groupOf[k] = g
		}
	}
	for _, id := range sortedIDs(groups) {
		g := groups[id]
		if g.kind == kindMachinePool {
			ids, _, _ := unstructured.NestedStringSlice(g.obj.Object, "spec", "providerIDList")
			for _, providerID := range ids {
				snap.poolOf[providerID] = g
			}
		}
		// As upstream: a group at zero replicas that cannot say what its
		// nodes would be is no node group.
		if g.replicas == 0 {
			if _, err := g.TemplateNodeInfo(); err != nil {
				logger.V(4).Info("Leaving out a node group at zero replicas without a template", "nodeGroup", id, "reason", err.Error())
				continue
			}
		}
		snap.groups = append(snap.groups, g)
	}
	p.mu.Lock()
	p.snap = snap
	p.mu.Unlock()
	return nil
}

func sortedIDs(groups map[string]*nodeGroup) []string {
	ids := make([]string, 0, len(groups))
	for id := range groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func groupID(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// newNodeGroup returns nil for an object that is no node group (no size
// annotations, a max size of 0, paused), and an error naming the object when
// the annotations are present but invalid.
func (p *Provider) newNodeGroup(kind string, obj *unstructured.Unstructured) (*nodeGroup, error) {
	annotations := obj.GetAnnotations()
	minText, hasMin := annotations[NodeGroupMinSizeAnnotation]
	maxText, hasMax := annotations[NodeGroupMaxSizeAnnotation]
	id := groupID(kind, obj.GetNamespace(), obj.GetName())
	if !hasMin && !hasMax {
		return nil, nil
	}
	if !hasMin || !hasMax {
		return nil, fmt.Errorf("%s: a node group needs both %s and %s", id, NodeGroupMinSizeAnnotation, NodeGroupMaxSizeAnnotation)
	}
	minSize, err := strconv.Atoi(minText)
	if err != nil || minSize < 0 {
		return nil, fmt.Errorf("%s: %s %q is not a non-negative integer", id, NodeGroupMinSizeAnnotation, minText)
	}
	maxSize, err := strconv.Atoi(maxText)
	if err != nil || maxSize < 0 {
		return nil, fmt.Errorf("%s: %s %q is not a non-negative integer", id, NodeGroupMaxSizeAnnotation, maxText)
	}
	if maxSize < minSize {
		return nil, fmt.Errorf("%s: max size %d is less than min size %d", id, maxSize, minSize)
	}
	if _, paused := annotations[PausedAnnotation]; paused || maxSize == 0 {
		return nil, nil
	}
	// A missing spec.replicas reads as 0, as through the scale subresource.
	replicas, _, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil {
		return nil, fmt.Errorf("%s: spec.replicas: %w", id, err)
	}
	return &nodeGroup{p: p, id: id, kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(),
		minSize: minSize, maxSize: maxSize, replicas: int(replicas), obj: obj}, nil
}
