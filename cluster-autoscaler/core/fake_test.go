package core

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cloudprovider"
)

// fakeProvider is an in-memory cloud: groups grow when asked, nodes never
// register, so every increase stays upcoming.
type fakeProvider struct {
	groups []*fakeGroup
	// byID indexes groups, rebuilt when groups grow: a scan per node would
	// make the large benchmarks measure the fake (nodes x groups).
	byID map[string]*fakeGroup
}

func (p *fakeProvider) Name() string { return "fake" }
func (p *fakeProvider) NodeGroups() []cloudprovider.NodeGroup {
	out := make([]cloudprovider.NodeGroup, 0, len(p.groups))
	for _, g := range p.groups {
		out = append(out, g)
	}
	return out
}
func (p *fakeProvider) NodeGroupForNode(n *corev1.Node) (cloudprovider.NodeGroup, error) {
	if len(p.byID) != len(p.groups) {
		p.byID = make(map[string]*fakeGroup, len(p.groups))
		for _, g := range p.groups {
			p.byID[g.id] = g
		}
	}
	if g, ok := p.byID[n.Labels["group"]]; ok {
		return g, nil
	}
	return nil, nil
}
func (p *fakeProvider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) { return nil, nil }
func (p *fakeProvider) Refresh() error                                              { return nil }
func (p *fakeProvider) Cleanup() error                                              { return nil }

type fakeGroup struct {
	mu        sync.Mutex
	id        string
	min, max  int
	target    int
	instances []cloudprovider.Instance
	template  *corev1.Node
	// fail, when set, is IncreaseSize's error.
	fail error
	// increased counts IncreaseSize calls.
	increased int
	// decreases are DecreaseTargetSize's deltas.
	decreases []int
}

func (g *fakeGroup) Id() string   { return g.id }
func (g *fakeGroup) MinSize() int { return g.min }
func (g *fakeGroup) MaxSize() int { return g.max }
func (g *fakeGroup) TargetSize() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.target, nil
}
func (g *fakeGroup) IncreaseSize(delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.increased++
	if g.fail != nil {
		return g.fail
	}
	if g.target+delta > g.max {
		return fmt.Errorf("group %s: %d+%d exceeds max %d", g.id, g.target, delta, g.max)
	}
	for i := 0; i < delta; i++ {
		g.instances = append(g.instances, cloudprovider.Instance{
			Id: fmt.Sprintf("fake://%s/%d", g.id, len(g.instances)), Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating},
		})
	}
	g.target += delta
	return nil
}
func (g *fakeGroup) DeleteNodes([]*corev1.Node) error      { return nil }
func (g *fakeGroup) ForceDeleteNodes([]*corev1.Node) error { return cloudprovider.ErrNotImplemented }
func (g *fakeGroup) DecreaseTargetSize(delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decreases = append(g.decreases, delta)
	g.target += delta
	return nil
}
func (g *fakeGroup) Nodes() ([]cloudprovider.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]cloudprovider.Instance(nil), g.instances...), nil
}
func (g *fakeGroup) TemplateNodeInfo() (*cloudprovider.NodeInfo, error) {
	return &cloudprovider.NodeInfo{Node: g.template.DeepCopy()}, nil
}
func (g *fakeGroup) Exist() bool   { return true }
func (g *fakeGroup) Debug() string { return g.id }
