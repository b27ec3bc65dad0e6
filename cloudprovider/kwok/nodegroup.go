package kwok

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
)

// nodeGroup is a view on one configured group; it reads the provider's current
// config and state, so it stays valid across Refresh.
type nodeGroup struct {
	p    *Provider
	name string
}

var _ cloudprovider.NodeGroup = (*nodeGroup)(nil)

func (g *nodeGroup) spec() (*groupSpec, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	spec, ok := g.p.config.groups[g.name]
	if !ok {
		return nil, fmt.Errorf("node group %s is no longer in the kwok cloud config", g.name)
	}
	return spec, nil
}

// snapshot returns a copy of the group's instances as last read or written.
func (g *nodeGroup) snapshot() groupState {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	gs, ok := g.p.state.groups[g.name]
	if !ok {
		return groupState{}
	}
	return groupState{Instances: append([]instanceRecord(nil), gs.Instances...)}
}

func (g *nodeGroup) Id() string { return g.name }

func (g *nodeGroup) MinSize() int {
	if spec, err := g.spec(); err == nil {
		return spec.minSize
	}
	return 0
}

func (g *nodeGroup) MaxSize() int {
	if spec, err := g.spec(); err == nil {
		return spec.maxSize
	}
	return 0
}

func (g *nodeGroup) Exist() bool {
	_, err := g.spec()
	return err == nil
}

func (g *nodeGroup) TargetSize() (int, error) {
	gs := g.snapshot()
	return gs.targetSize(), nil
}

func (g *nodeGroup) Debug() string {
	gs := g.snapshot()
	return fmt.Sprintf("%s (min: %d, max: %d, target: %d)", g.name, g.MinSize(), g.MaxSize(), gs.targetSize())
}

// IncreaseSize records delta new instances in Creating state; the cloud backend
// provisions them.
func (g *nodeGroup) IncreaseSize(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.name, delta)
	}
	spec, err := g.spec()
	if err != nil {
		return err
	}
	if spec.increaseSizeError != "" {
		return fmt.Errorf("node group %s: %s", g.name, spec.increaseSizeError)
	}
	now := g.p.clock.Now().UTC()
	var added []string
	st, err := g.p.store.update(g.p.ctx, func(st *cloudState) error {
		gs := st.group(g.name)
		target := gs.targetSize()
		if target+delta > spec.maxSize {
			return fmt.Errorf("node group %s: increasing the size by %d to %d would exceed the max size %d", g.name, delta, target+delta, spec.maxSize)
		}
		taken := st.names()
		added = added[:0]
		for range delta {
			id := providerID(g.name, g.p.uniqueName(g.name, taken))
			gs.Instances = append(gs.Instances, instanceRecord{ID: id, State: stateCreating, CreatedAt: now})
			added = append(added, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	g.p.setState(st)
	klog.FromContext(g.p.ctx).V(2).Info("Requested kwok instances", "nodeGroup", g.name, "delta", delta, "instances", added)
	return nil
}

// DeleteNodes marks the nodes' instances Deleting; the backend deletes the nodes
// and forgets the instances. Nodes of failed instances, which the autoscaler
// builds from Nodes(), are accepted too.
func (g *nodeGroup) DeleteNodes(nodes []*corev1.Node) error { return g.deleteNodes(nodes, false) }

// ForceDeleteNodes is DeleteNodes without the min size check.
func (g *nodeGroup) ForceDeleteNodes(nodes []*corev1.Node) error { return g.deleteNodes(nodes, true) }

func (g *nodeGroup) deleteNodes(nodes []*corev1.Node, force bool) error {
	spec, err := g.spec()
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(nodes))
	for _, n := range nodes {
		group, _, ok := parseProviderID(n.Spec.ProviderID)
		if !ok || group != g.name {
			return fmt.Errorf("node group %s: node %s (provider ID %q) does not belong to it", g.name, n.Name, n.Spec.ProviderID)
		}
		ids = append(ids, n.Spec.ProviderID)
	}
	st, err := g.p.store.update(g.p.ctx, func(st *cloudState) error {
		gs := st.group(g.name)
		index := map[string]int{}
		for i, in := range gs.Instances {
			index[in.ID] = i
		}
		marked := map[string]bool{}
		for _, id := range ids {
			i, ok := index[id]
			if !ok {
				return fmt.Errorf("node group %s: no instance %s", g.name, id)
			}
			if gs.Instances[i].State != stateDeleting {
				marked[id] = true
			}
		}
		if after := gs.targetSize() - len(marked); after < spec.minSize && !force {
			return fmt.Errorf("node group %s: deleting %d nodes would shrink it to %d, below its min size %d", g.name, len(marked), after, spec.minSize)
		}
		for id := range marked {
			gs.Instances[index[id]].State = stateDeleting
		}
		return nil
	})
	if err != nil {
		return err
	}
	g.p.setState(st)
	klog.FromContext(g.p.ctx).V(2).Info("Deleting kwok instances", "nodeGroup", g.name, "instances", ids)
	return nil
}

// DecreaseTargetSize cancels instances that have not registered: failed ones
// first, then the newest Creating ones. It never touches a running instance.
func (g *nodeGroup) DecreaseTargetSize(delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: size decrease must be negative, got %d", g.name, delta)
	}
	var cancelled []string
	st, err := g.p.store.update(g.p.ctx, func(st *cloudState) error {
		gs := st.group(g.name)
		var candidates []int
		for _, state := range []instanceState{stateFailed, stateCreating} {
			for i := len(gs.Instances) - 1; i >= 0; i-- {
				if gs.Instances[i].State == state {
					candidates = append(candidates, i)
				}
			}
		}
		if -delta > len(candidates) {
			return fmt.Errorf("node group %s: cannot decrease the target size by %d: only %d of its %d instances are not registered yet",
				g.name, -delta, len(candidates), gs.targetSize())
		}
		drop := map[int]bool{}
		cancelled = cancelled[:0]
		for _, i := range candidates[:-delta] {
			drop[i] = true
			cancelled = append(cancelled, gs.Instances[i].ID)
		}
		kept := gs.Instances[:0:0]
		for i, in := range gs.Instances {
			if !drop[i] {
				kept = append(kept, in)
			}
		}
		gs.Instances = kept
		return nil
	})
	if err != nil {
		return err
	}
	g.p.setState(st)
	klog.FromContext(g.p.ctx).V(2).Info("Cancelled kwok instances", "nodeGroup", g.name, "instances", cancelled)
	return nil
}

// Nodes lists every instance, sorted by ID. Failed instances are Creating with
// ErrorInfo, which is how the autoscaler expects a failed creation.
func (g *nodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	gs := g.snapshot()
	out := make([]cloudprovider.Instance, 0, len(gs.Instances))
	for _, in := range gs.Instances {
		out = append(out, cloudprovider.Instance{Id: in.ID, Status: in.status()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out, nil
}

func (r instanceRecord) status() *cloudprovider.InstanceStatus {
	switch r.State {
	case stateRunning:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	case stateDeleting:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	case stateFailed:
		class := cloudprovider.OtherErrorClass
		if r.ErrorClass == "OutOfResources" {
			class = cloudprovider.OutOfResourcesErrorClass
		}
		return &cloudprovider.InstanceStatus{
			State:     cloudprovider.InstanceCreating,
			ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: class, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage},
		}
	default:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	}
}

// TemplateNodeInfo is a Ready node of the group's shape with no pods (the
// kwok cloud runs no DaemonSets of its own) and the ResourceSlices the kwok
// DRA driver publishes for the devices its config declares.
func (g *nodeGroup) TemplateNodeInfo() (*cloudprovider.NodeInfo, error) {
	spec, err := g.spec()
	if err != nil {
		return nil, err
	}
	node := spec.templateNode()
	slices, err := NodeResourceSlices(node)
	if err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.name, err)
	}
	return &cloudprovider.NodeInfo{Node: node, ResourceSlices: slices}, nil
}
