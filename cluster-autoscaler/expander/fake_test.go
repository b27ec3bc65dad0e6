package expander

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/cloudprovider"
)

// fakeGroup is the smallest NodeGroup the expanders can be driven with: they only
// ever ask for Id.
type fakeGroup struct{ id string }

var _ cloudprovider.NodeGroup = fakeGroup{}

func (g fakeGroup) Id() string                               { return g.id }
func (g fakeGroup) MinSize() int                             { return 0 }
func (g fakeGroup) MaxSize() int                             { return 100 }
func (g fakeGroup) TargetSize() (int, error)                 { return 0, nil }
func (g fakeGroup) IncreaseSize(int) error                   { return cloudprovider.ErrNotImplemented }
func (g fakeGroup) DeleteNodes([]*corev1.Node) error         { return cloudprovider.ErrNotImplemented }
func (g fakeGroup) ForceDeleteNodes([]*corev1.Node) error    { return cloudprovider.ErrNotImplemented }
func (g fakeGroup) DecreaseTargetSize(int) error             { return cloudprovider.ErrNotImplemented }
func (g fakeGroup) Nodes() ([]cloudprovider.Instance, error) { return nil, nil }
func (g fakeGroup) TemplateNodeInfo() (*cloudprovider.NodeInfo, error) {
	return nil, cloudprovider.ErrNotImplemented
}
func (g fakeGroup) Exist() bool   { return true }
func (g fakeGroup) Debug() string { return g.id }

// opt is an option on group id with nodes nodes of template and the given pods.
func opt(id string, nodes int, template *corev1.Node, pods ...*corev1.Pod) Option {
	return Option{NodeGroup: fakeGroup{id: id}, NodeCount: nodes, Pods: pods, Template: template, Debug: id}
}

// withPods is an option that only most-pods can tell apart from another.
func withPods(id string, n int) Option {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = pod("100m", "100Mi")
	}
	return opt(id, 1, node("1", "1Gi"), pods...)
}

func pod(cpu, memory string) *corev1.Pod {
	requests := corev1.ResourceList{}
	if cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name:      "c",
		Resources: corev1.ResourceRequirements{Requests: requests},
	}}}}
}

func node(cpu, memory string) *corev1.Node {
	allocatable := corev1.ResourceList{}
	if cpu != "" {
		allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		allocatable[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	// Capacity is deliberately larger: least-waste must measure allocatable.
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1000Ti"),
	}
	return &corev1.Node{Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable}}
}

func ids(options []Option) []string {
	if options == nil {
		return nil
	}
	out := make([]string, len(options))
	for i := range options {
		out[i] = groupID(&options[i])
	}
	return out
}

func idOf(o *Option) string {
	if o == nil {
		return "<nil>"
	}
	return groupID(o)
}

// staticConfig is a Deps.PriorityConfig that always returns the same answer.
func staticConfig(data string, found bool, err error) func() (string, bool, error) {
	return func() (string, bool, error) { return data, found, err }
}
