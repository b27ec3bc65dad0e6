package kwok

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodeGroupShape is one validated node group of a config with its values
// parsed, for another infrastructure that builds the same nodes from the same
// file (localcluster's Cluster API provider).
type NodeGroupShape struct {
	Name             string
	MinSize, MaxSize int
	// Labels and Taints are the configured ones, without the cloud's own.
	Labels            map[string]string
	Taints            []corev1.Taint
	Capacity          corev1.ResourceList
	Allocatable       corev1.ResourceList
	ProvisioningDelay time.Duration
	// Failure is nil when instances do not fail.
	Failure *FailureShape
	// IncreaseSizeError is the configured failures.increaseSizeError.
	IncreaseSizeError string
	// Devices are the DRA device pools every node of the group has.
	Devices []DevicePoolConfig
}

// FailureShape is a group's injected instance failure.
type FailureShape struct {
	OutOfResources bool
	Code, Message  string
	// FailAfter is -1 when instances fail from the first one.
	FailAfter int
}

// NodeGroupShapes validates the config and returns its groups, sorted by name.
func (c *Config) NodeGroupShapes() ([]NodeGroupShape, error) {
	compiled, err := c.compile()
	if err != nil {
		return nil, err
	}
	out := make([]NodeGroupShape, 0, len(compiled.names))
	for _, name := range compiled.names {
		g := compiled.groups[name]
		shape := NodeGroupShape{
			Name: g.name, MinSize: g.minSize, MaxSize: g.maxSize,
			Labels: g.labels, Taints: g.taints,
			Capacity: g.capacity.DeepCopy(), Allocatable: g.allocatable.DeepCopy(),
			ProvisioningDelay: g.delay, IncreaseSizeError: g.increaseSizeError,
		}
		for _, p := range g.devices {
			shape.Devices = append(shape.Devices, p.config)
		}
		if f := g.failures; f != nil {
			shape.Failure = &FailureShape{OutOfResources: f.class == "OutOfResources", Code: f.code, Message: f.message, FailAfter: f.failAfter}
		}
		out = append(out, shape)
	}
	return out, nil
}
