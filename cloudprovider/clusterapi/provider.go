// Package clusterapi is the cloud provider for clusters whose machines Cluster
// API manages. A MachineDeployment, or a MachineSet that no MachineDeployment
// owns, is a node group when it carries upstream's min and max size
// annotations. The provider scales groups through the scale subresource only,
// marks the machines it wants gone with Cluster API's delete-machine
// annotation, and builds scale-from-zero templates from upstream's capacity
// annotations. It reads objects as unstructured through the dynamic client, so
// it needs no Cluster API Go types.
package clusterapi

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
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
	// Namespace limits discovery to one namespace; empty means all.
	Namespace string
	// APIVersion of cluster.x-k8s.io to use; DefaultAPIVersion when empty.
	APIVersion string
}

// Provider implements cloudprovider.CloudProvider on Cluster API. It lists the
// MachineDeployments, MachineSets and Machines on every Refresh and answers
// from that snapshot; the scaling calls go to the API server.
type Provider struct {
	// ctx bounds the API calls of the NodeGroup methods, which take no context.
	ctx       context.Context
	client    dynamic.Interface
	namespace string
	gvr       map[string]schema.GroupVersionResource // by kind, and "Machine"

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
}

// NewProvider discovers the node groups once; ctx bounds every API call the
// provider makes later, so cancel it only on shutdown.
func NewProvider(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("clusterapi: Options.Client is required")
	}
	version := opts.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	p := &Provider{
		ctx:       ctx,
		client:    opts.Client,
		namespace: opts.Namespace,
		gvr: map[string]schema.GroupVersionResource{
			kindMachineDeployment: {Group: APIGroup, Version: version, Resource: "machinedeployments"},
			kindMachineSet:        {Group: APIGroup, Version: version, Resource: "machinesets"},
			"Machine":             {Group: APIGroup, Version: version, Resource: "machines"},
		},
	}
	if err := p.Refresh(); err != nil {
		return nil, err
	}
	return p, nil
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
// then by provider ID) and the group that owns it. Nodes without a machine, and
// machines in no group (control plane machines, groups without the size
// annotations), have none.
func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	snap := p.snapshot()
	k, ok := snap.machineForNode(node)
	if !ok {
		return nil, nil
	}
	if g := snap.groupOf[k]; g != nil {
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

// Cleanup has nothing to release.
func (p *Provider) Cleanup() error { return nil }

func (p *Provider) snapshot() *snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap
}

func (p *Provider) resource(kind, namespace string) dynamic.ResourceInterface {
	return p.client.Resource(p.gvr[kind]).Namespace(namespace)
}

func (p *Provider) list(kind string) ([]unstructured.Unstructured, error) {
	list, err := p.client.Resource(p.gvr[kind]).Namespace(p.namespace).List(p.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", p.gvr[kind].Resource, err)
	}
	return list.Items, nil
}

// Refresh lists the Cluster API objects and rebuilds the groups. A group whose
// size annotations are invalid is left out and logged; the rest still scale.
func (p *Provider) Refresh() error {
	logger := klog.FromContext(p.ctx).WithValues("cloudProvider", ProviderName)
	deployments, err := p.list(kindMachineDeployment)
	if err != nil {
		return err
	}
	sets, err := p.list(kindMachineSet)
	if err != nil {
		return err
	}
	machines, err := p.list("Machine")
	if err != nil {
		return err
	}
	snap := &snapshot{
		machines:     map[types.NamespacedName]*unstructured.Unstructured{},
		byProviderID: map[string]types.NamespacedName{},
		byName:       map[string][]types.NamespacedName{},
		groupOf:      map[types.NamespacedName]*nodeGroup{},
	}
	groups := map[string]*nodeGroup{} // by kind/namespace/name
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
	for i := range deployments {
		addGroup(kindMachineDeployment, &deployments[i])
	}
	for i := range sets {
		// A MachineDeployment's sets scale with it, never on their own.
		if owner(&sets[i], kindMachineDeployment) == "" {
			addGroup(kindMachineSet, &sets[i])
		}
	}
	for i := range machines {
		m := &machines[i]
		k := key(m)
		snap.machines[k] = m
		snap.byName[k.Name] = append(snap.byName[k.Name], k)
		if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" {
			snap.byProviderID[id] = k
		}
		var g *nodeGroup
		if d := m.GetLabels()[DeploymentNameLabel]; d != "" {
			g = groups[groupID(kindMachineDeployment, k.Namespace, d)]
		} else if s := owner(m, kindMachineSet); s != "" {
			g = groups[groupID(kindMachineSet, k.Namespace, s)]
		} else if s := m.GetLabels()[SetNameLabel]; s != "" {
			g = groups[groupID(kindMachineSet, k.Namespace, s)]
		}
		if g != nil {
			g.machines = append(g.machines, m)
			snap.groupOf[k] = g
		}
	}
	for _, g := range groups {
		snap.groups = append(snap.groups, g)
	}
	sort.Slice(snap.groups, func(i, j int) bool { return snap.groups[i].Id() < snap.groups[j].Id() })
	p.mu.Lock()
	p.snap = snap
	p.mu.Unlock()
	return nil
}

func groupID(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// newNodeGroup returns nil for an object without both size annotations, and an
// error naming the object when they are present but invalid.
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
	// A missing spec.replicas reads as 0, as through the scale subresource.
	replicas, _, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil {
		return nil, fmt.Errorf("%s: spec.replicas: %w", id, err)
	}
	return &nodeGroup{p: p, id: id, kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(),
		minSize: minSize, maxSize: maxSize, replicas: int(replicas), obj: obj}, nil
}
