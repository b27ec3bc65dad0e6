package clusterapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
)

// nodeGroup is a MachineDeployment, a MachineSet or a MachinePool as of the
// last Refresh.
type nodeGroup struct {
	p                *Provider
	id               string // Kind/namespace/name, as upstream names them
	kind             string
	namespace, name  string
	minSize, maxSize int
	obj              *unstructured.Unstructured // the informer's object: read only
	machines         []*unstructured.Unstructured
	mu               sync.Mutex
	replicas         int // spec.replicas, updated by our own scaling
}

var _ cloudprovider.NodeGroup = (*nodeGroup)(nil)

func (g *nodeGroup) Id() string   { return g.id }
func (g *nodeGroup) MinSize() int { return g.minSize }
func (g *nodeGroup) MaxSize() int { return g.maxSize }
func (g *nodeGroup) Exist() bool  { return true }

func (g *nodeGroup) TargetSize() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.replicas, nil
}

func (g *nodeGroup) Debug() string {
	size, _ := g.TargetSize()
	return fmt.Sprintf("%s (min: %d, max: %d, replicas: %d)", g.id, g.minSize, g.maxSize, size)
}

// scale reads the group's scale subresource, lets next compute the new replica
// count from the current one, and writes it back through the subresource. The
// write carries the read's resourceVersion, so a concurrent change makes it
// conflict, and it is recomputed from a fresh read. It returns once the
// informer has seen the write, so the next Refresh reads the new target.
func (g *nodeGroup) scale(next func(current int) (int, error)) (from, to int, err error) {
	res := g.p.resource(g.kind, g.namespace)
	written := ""
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := res.Get(g.p.ctx, g.name, metav1.GetOptions{}, "scale")
		if err != nil {
			return fmt.Errorf("reading the scale of %s: %w", g.id, err)
		}
		current, _, err := unstructured.NestedInt64(s.Object, "spec", "replicas")
		if err != nil {
			return fmt.Errorf("reading the scale of %s: %w", g.id, err)
		}
		want, err := next(int(current))
		if err != nil {
			return err
		}
		from, to = int(current), want
		if want == int(current) {
			return nil
		}
		if err := unstructured.SetNestedField(s.Object, int64(want), "spec", "replicas"); err != nil {
			return err
		}
		updated, err := res.Update(g.p.ctx, s, metav1.UpdateOptions{FieldManager: FieldManager}, "scale")
		if err != nil {
			return fmt.Errorf("scaling %s from %d to %d: %w", g.id, current, want, err)
		}
		written = updated.GetResourceVersion()
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	g.mu.Lock()
	g.replicas = to
	g.mu.Unlock()
	if written != "" {
		err := g.p.informers.waitForWrite(g.kind, g.namespace, g.name, written, func(u *unstructured.Unstructured) bool {
			r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			return int(r) == to
		})
		if err != nil {
			klog.FromContext(g.p.ctx).Info("The informer has not seen a scaling yet", "nodeGroup", g.id, "replicas", to, "err", err)
		}
	}
	return from, to, nil
}

// IncreaseSize raises the replicas by delta through the scale subresource.
func (g *nodeGroup) IncreaseSize(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("%s: size increase must be positive, got %d", g.id, delta)
	}
	from, to, err := g.scale(func(current int) (int, error) {
		if current+delta > g.maxSize {
			return 0, fmt.Errorf("%s: increasing the size by %d to %d would exceed the max size %d", g.id, delta, current+delta, g.maxSize)
		}
		return current + delta, nil
	})
	if err != nil {
		return err
	}
	klog.FromContext(g.p.ctx).V(2).Info("Scaled up", "nodeGroup", g.id, "from", from, "to", to)
	return nil
}

// DeleteNodes marks the nodes' machines with the delete-machine annotation, so
// that Cluster API deletes exactly those, then lowers the replicas by their
// number, never below the min size. If the scaling fails the marks are taken
// back. A MachinePool node without a Machine only lowers the replicas, as
// upstream does.
func (g *nodeGroup) DeleteNodes(nodes []*corev1.Node) error { return g.deleteNodes(nodes, false) }

// ForceDeleteNodes is DeleteNodes below the min size too: upstream's
// --force-delete-failed-nodes and --force-delete-unregistered-nodes.
func (g *nodeGroup) ForceDeleteNodes(nodes []*corev1.Node) error { return g.deleteNodes(nodes, true) }

func (g *nodeGroup) deleteNodes(nodes []*corev1.Node, force bool) error {
	snap := g.p.snapshot()
	var doomed []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	withoutMachine := 0
	for _, n := range nodes {
		k, ok := snap.machineForNode(n)
		if !ok {
			if g.kind == kindMachinePool && n.Spec.ProviderID != "" && snap.poolOf[n.Spec.ProviderID] == g {
				withoutMachine++
				continue
			}
			return fmt.Errorf("%s: node %s (provider ID %q) has no machine", g.id, n.Name, n.Spec.ProviderID)
		}
		if owner := snap.groupOf[k]; owner == nil || owner.id != g.id {
			return fmt.Errorf("%s: node %s belongs to machine %s, which is not in this node group", g.id, n.Name, k)
		}
		if seen[k] || isDeleting(snap.machines[k]) {
			continue
		}
		seen[k] = true
		doomed = append(doomed, k)
	}
	count := len(doomed) + withoutMachine
	if count == 0 {
		return nil
	}
	next := func(current int) (int, error) {
		if !force && current-count < g.minSize {
			return 0, fmt.Errorf("%s: deleting %d nodes would shrink it from %d to %d, below its min size %d",
				g.id, count, current, current-count, g.minSize)
		}
		return max(current-count, 0), nil
	}
	// Check before marking anything; the scaling checks again against a fresh read.
	if _, err := g.currentReplicas(next); err != nil {
		return err
	}
	return g.markAndScale(doomed, next)
}

// DecreaseTargetSize lowers the replicas by -delta without deleting a
// machine: only replicas that never became a Machine are given up. As
// upstream's provider, it refuses to go below the group's instances (its
// machines not being deleted, and a MachinePool's listed provider IDs no
// Machine stands for), so that Cluster API has nothing to delete.
func (g *nodeGroup) DecreaseTargetSize(delta int) error {
	if delta >= 0 {
		return fmt.Errorf("%s: size decrease must be negative, got %d", g.id, delta)
	}
	instances := g.liveInstances()
	from, to, err := g.scale(func(current int) (int, error) {
		if current+delta < instances {
			return 0, fmt.Errorf("%s: decreasing the target size by %d from %d would delete some of its %d instances",
				g.id, -delta, current, instances)
		}
		return current + delta, nil
	})
	if err != nil {
		return err
	}
	klog.FromContext(g.p.ctx).V(2).Info("Decreased the target size", "nodeGroup", g.id, "from", from, "to", to)
	return nil
}

// liveInstances counts the group's machines not being deleted, or a
// MachinePool's listed provider IDs when they are more.
func (g *nodeGroup) liveInstances() int {
	live := 0
	for _, m := range g.currentMachines() {
		if !isDeleting(m) {
			live++
		}
	}
	if g.kind == kindMachinePool {
		ids, _, _ := unstructured.NestedStringSlice(g.obj.Object, "spec", "providerIDList")
		live = max(live, len(ids))
	}
	return live
}

// currentReplicas reads the scale subresource and applies check to it.
func (g *nodeGroup) currentReplicas(check func(int) (int, error)) (int, error) {
	s, err := g.p.resource(g.kind, g.namespace).Get(g.p.ctx, g.name, metav1.GetOptions{}, "scale")
	if err != nil {
		return 0, fmt.Errorf("reading the scale of %s: %w", g.id, err)
	}
	current, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
	if _, err := check(int(current)); err != nil {
		return 0, err
	}
	return int(current), nil
}

// currentMachines returns the group's machines from the latest snapshot.
func (g *nodeGroup) currentMachines() []*unstructured.Unstructured {
	for _, other := range g.p.snapshot().groups {
		if other.id == g.id {
			return other.machines
		}
	}
	return g.machines
}

func (g *nodeGroup) markAndScale(doomed []types.NamespacedName, next func(int) (int, error)) error {
	logger := klog.FromContext(g.p.ctx)
	value := time.Now().UTC().Format(time.RFC3339)
	for i, k := range doomed {
		if err := g.annotateMachine(k, &value); err != nil {
			g.unmark(doomed[:i])
			return err
		}
	}
	from, to, err := g.scale(next)
	if err != nil {
		g.unmark(doomed)
		return err
	}
	logger.V(2).Info("Scaled down", "nodeGroup", g.id, "from", from, "to", to, "markedMachines", doomed)
	return nil
}

func (g *nodeGroup) unmark(keys []types.NamespacedName) {
	for _, k := range keys {
		if err := g.annotateMachine(k, nil); err != nil {
			klog.FromContext(g.p.ctx).Error(err, "Could not take back the delete-machine annotation", "machine", k)
		}
	}
}

// annotateMachine sets (value != nil) or removes the delete-machine annotation
// with a merge patch, which touches nothing else of the machine.
func (g *nodeGroup) annotateMachine(k types.NamespacedName, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{DeleteMachineAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = g.p.resource(kindMachine, k.Namespace).Patch(g.p.ctx, k.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("annotating machine %s for deletion: %w", k, err)
	}
	return nil
}

// Nodes lists the group's machines, and a MachinePool's listed provider IDs
// that no Machine stands for, sorted by instance ID.
func (g *nodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	out := make([]cloudprovider.Instance, 0, len(g.machines))
	known := map[string]bool{}
	for _, m := range g.machines {
		id := instanceID(m)
		known[id] = true
		out = append(out, cloudprovider.Instance{Id: id, Status: machineStatus(m)})
	}
	if g.kind == kindMachinePool {
		ids, _, _ := unstructured.NestedStringSlice(g.obj.Object, "spec", "providerIDList")
		for _, id := range ids {
			if !known[id] {
				out = append(out, cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out, nil
}
