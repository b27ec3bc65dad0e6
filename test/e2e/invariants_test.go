package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/capacity"
)

// invariantChecker watches every node and pod event of a run and fails it on:
//   - registered nodes over any valid CapacityQuota (Quotascale promises no
//     overshoot, also while nodes provision, fail or the autoscaler restarts);
//   - an ElasticQuotaTree node over its max, or a reclaim taking a quota node
//     below its min (the treeChecker);
//   - an eviction that is neither the scheduler's reclaim (or same-leaf
//     priority preemption) nor a scale-down drain of a node marked for deletion.
type invariantChecker struct {
	tree *treeChecker

	mu         sync.Mutex
	quotas     *capacity.Set
	limits     map[string]autoscalingv1beta1.ResourceList
	marked     map[string]bool // nodes that carried the ToBeDeleted taint
	violations []string
	drained    int
}

func startInvariantChecker(t *testing.T, ctx context.Context, tree *schedulingv1beta1.ElasticQuotaTree, quotas []*autoscalingv1beta1.CapacityQuota) *invariantChecker {
	t.Helper()
	c := &invariantChecker{
		tree:   startTreeChecker(t, ctx, tree),
		quotas: capacity.Build(quotas, capacity.Options{}),
		limits: map[string]autoscalingv1beta1.ResourceList{},
		marked: map[string]bool{},
	}
	for _, q := range quotas {
		c.limits[q.Name] = q.Spec.Limits.Resources
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cluster.Client, 0)
	_, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.node(obj.(*corev1.Node), false) },
		UpdateFunc: func(_, obj any) { c.node(obj.(*corev1.Node), false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			c.node(obj.(*corev1.Node), true)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.pod(obj.(*corev1.Pod)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.violations) > 0 { // the tree checker reports its own
			t.Errorf("invariants broken:\n%v", c.violations)
		}
	})
	return c
}

func (c *invariantChecker) node(n *corev1.Node, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, taint := range n.Spec.Taints {
		if taint.Key == "ToBeDeletedByClusterAutoscaler" {
			c.marked[n.Name] = true
		}
	}
	if deleted {
		c.quotas.RemoveNode(n.Name)
		return
	}
	c.quotas.UpdateNode(n)
	for _, s := range c.quotas.Status() {
		if !s.Valid {
			continue
		}
		for name, limit := range c.limits[s.Name] {
			used := s.Used[corev1.ResourceName(name)]
			if used.Cmp(limit) > 0 {
				c.violations = append(c.violations, fmt.Sprintf("CapacityQuota %s: registered nodes use %s %s, over its limit %s (node %s)",
					s.Name, name, used.String(), limit.String(), n.Name))
			}
		}
	}
}

// pod checks why a pod is being disrupted when the DisruptionTarget condition
// appears on it.
func (c *invariantChecker) pod(p *corev1.Pod) {
	var reason string
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue {
			reason = cond.Reason
		}
	}
	if reason == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case reason == corev1.PodReasonPreemptionByScheduler:
		// A reclaim; the tree checker verifies it took no quota node below min.
	case reason == "EvictionByEvictionAPI" && c.marked[p.Spec.NodeName]:
		c.drained++
	default:
		msg := fmt.Sprintf("pod %s/%s on %s disrupted for %s, neither a reclaim nor a scale-down drain", p.Namespace, p.Name, p.Spec.NodeName, reason)
		for _, v := range c.violations {
			if v == msg {
				return
			}
		}
		c.violations = append(c.violations, msg)
	}
}

// Violations are the tree's and the checker's own.
func (c *invariantChecker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(c.tree.Violations(), c.violations...)
}

// Counts report what the run exercised: reclaim evictions and drained pods.
func (c *invariantChecker) Counts() (reclaims, drained int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tree.Evictions(), c.drained
}
