// Package cloudprovider defines how the autoscaler sees the infrastructure: a
// CloudProvider owns NodeGroups, and a NodeGroup grows and shrinks a set of
// identical instances. The shapes follow the upstream cluster autoscaler's so that
// its users recognise them; provider implementations live in subpackages.
package cloudprovider

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// CloudProvider is one source of node groups.
type CloudProvider interface {
	// Name identifies the provider, as in --cloud-provider.
	Name() string
	// NodeGroups returns every node group the autoscaler may scale.
	NodeGroups() []NodeGroup
	// NodeGroupForNode returns the group a node belongs to, or nil (and no error)
	// when the node is not managed by this provider.
	NodeGroupForNode(node *corev1.Node) (NodeGroup, error)
	// GetResourceLimiter returns the cluster-wide limits the provider imposes, on top
	// of the autoscaler's flags.
	GetResourceLimiter() (*ResourceLimiter, error)
	// Refresh is called at the start of every loop to pick up changes.
	Refresh() error
	// Cleanup releases what the provider holds; it is called on shutdown.
	Cleanup() error
}

// NodeGroup is a set of nodes with the same shape that scales as one.
type NodeGroup interface {
	// Id is unique within the provider.
	Id() string
	MinSize() int
	MaxSize() int
	// TargetSize is the size the group is asked to have: registered nodes plus
	// instances still being created.
	TargetSize() (int, error)
	// IncreaseSize asks for delta more instances. It returns once the request is
	// accepted, not once nodes have registered.
	IncreaseSize(delta int) error
	// DeleteNodes removes the given nodes' instances and shrinks the target,
	// never below the min size.
	DeleteNodes(nodes []*corev1.Node) error
	// ForceDeleteNodes is DeleteNodes even below the min size, for instances
	// that failed or never registered (upstream's --force-delete-failed-nodes
	// and --force-delete-unregistered-nodes); ErrNotImplemented when the
	// provider cannot, and the caller falls back to DeleteNodes.
	ForceDeleteNodes(nodes []*corev1.Node) error
	// DecreaseTargetSize lowers the target by -delta without deleting a
	// registered node; delta is negative. The loop calls it when the target has
	// run ahead of the group's instances for --max-node-provision-time, as
	// upstream's, to give up what was asked for and never came. The Cluster API
	// provider refuses to go below the group's instances, as upstream's; the
	// kwok cloud, whose target is its instances, cancels unregistered ones.
	DecreaseTargetSize(delta int) error
	// Nodes lists the group's instances, including those not registered yet.
	Nodes() ([]Instance, error)
	// TemplateNodeInfo describes a new node of this group, for scale-from-zero
	// simulation.
	TemplateNodeInfo() (*NodeInfo, error)
	// Exist says whether the group exists in the infrastructure.
	Exist() bool
	// Debug is a one-line description for logs.
	Debug() string
}

// NodeInfo is a template node with the pods every new node of the group runs
// (DaemonSet pods, for example) and the ResourceSlices its DRA drivers
// publish, node-local pools named for the template node.
type NodeInfo struct {
	Node           *corev1.Node
	Pods           []*corev1.Pod
	ResourceSlices []*resourcev1.ResourceSlice
}

// Instance is one machine of a node group. Id equals the registered node's
// spec.providerID.
type Instance struct {
	Id     string
	Status *InstanceStatus
}

// InstanceState is where an instance is in its life.
type InstanceState int

const (
	// InstanceRunning means the instance is up; its node may or may not have
	// registered yet.
	InstanceRunning InstanceState = iota + 1
	// InstanceCreating means the instance is being created.
	InstanceCreating
	// InstanceDeleting means the instance is being deleted.
	InstanceDeleting
)

func (s InstanceState) String() string {
	switch s {
	case InstanceRunning:
		return "Running"
	case InstanceCreating:
		return "Creating"
	case InstanceDeleting:
		return "Deleting"
	default:
		return fmt.Sprintf("InstanceState(%d)", int(s))
	}
}

// InstanceStatus is an instance's state and, when its creation failed, why.
type InstanceStatus struct {
	State     InstanceState
	ErrorInfo *InstanceErrorInfo
}

// InstanceErrorClass groups creation errors the way the autoscaler reacts to them.
type InstanceErrorClass int

const (
	// OutOfResourcesErrorClass means the infrastructure has no capacity (a stockout
	// or an exhausted cloud quota); the group backs off.
	OutOfResourcesErrorClass InstanceErrorClass = iota + 1
	// OtherErrorClass is any other creation error.
	OtherErrorClass
)

// InstanceErrorInfo describes a failed creation.
type InstanceErrorInfo struct {
	ErrorClass   InstanceErrorClass
	ErrorCode    string
	ErrorMessage string
}

// ErrNotImplemented is returned by optional methods a provider does not support.
var ErrNotImplemented = errors.New("not implemented")

// Standard resource names of a ResourceLimiter, as in upstream.
const (
	ResourceNameCores  = "cpu"
	ResourceNameMemory = "memory"
)

// ResourceLimiter holds cluster-wide minimum and maximum totals per resource.
type ResourceLimiter struct {
	minLimits map[string]int64
	maxLimits map[string]int64
}

// NewResourceLimiter builds a limiter; missing resources are unbounded.
func NewResourceLimiter(minLimits, maxLimits map[string]int64) *ResourceLimiter {
	copyOf := func(in map[string]int64) map[string]int64 {
		out := make(map[string]int64, len(in))
		for k, v := range in {
			out[k] = v
		}
		return out
	}
	return &ResourceLimiter{minLimits: copyOf(minLimits), maxLimits: copyOf(maxLimits)}
}

// GetMin returns the minimum for resource, 0 when unset.
func (r *ResourceLimiter) GetMin(resource string) int64 {
	if r == nil {
		return 0
	}
	return r.minLimits[resource]
}

// GetMax returns the maximum for resource and whether one is set.
func (r *ResourceLimiter) GetMax(resource string) (int64, bool) {
	if r == nil {
		return 0, false
	}
	v, ok := r.maxLimits[resource]
	return v, ok
}

// GetResources lists the resources with a minimum or a maximum, sorted.
func (r *ResourceLimiter) GetResources() []string {
	if r == nil {
		return nil
	}
	seen := map[string]bool{}
	for k := range r.minLimits {
		seen[k] = true
	}
	for k := range r.maxLimits {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
