package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/internal/typedinformer"
	"github.com/quotascale/quotascale/test/oracle"
)

// invariantChecker feeds the oracle (test/oracle, which shares no code with the
// quota library) every node, pod, CapacityQuota and ElasticQuotaTree event of
// a run, and fails the test on every promise it saw broken: nodes over a
// CapacityQuota, pods admitted over a tree node's max, reclaims below min, and
// evictions that are neither reclaims nor scale-down drains.
type invariantChecker struct {
	*oracle.Oracle

	mu sync.Mutex
	// nodesAdded are the nodes created while the checker watched.
	nodesAdded int
}

func startInvariantChecker(t *testing.T, ctx context.Context) *invariantChecker {
	t.Helper()
	c := &invariantChecker{Oracle: oracle.New()}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cluster.Client, 0)
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if n, ok := obj.(*corev1.Node); ok {
					c.SetNode(n)
					if !initial {
						c.mu.Lock()
						c.nodesAdded++
						c.mu.Unlock()
					}
				}
			},
			UpdateFunc: func(_, obj any) {
				if n, ok := obj.(*corev1.Node); ok {
					c.SetNode(n)
				}
			},
			DeleteFunc: func(obj any) {
				if n, ok := finalState(obj).(*corev1.Node); ok {
					c.DeleteNode(n.Name)
				}
			},
		}},
		{factory.Core().V1().Pods().Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if p, ok := obj.(*corev1.Pod); ok {
					c.SetPod(p, initial)
				}
			},
			UpdateFunc: func(_, obj any) {
				if p, ok := obj.(*corev1.Pod); ok {
					c.SetPod(p, false)
				}
			},
			DeleteFunc: func(obj any) {
				if p, ok := finalState(obj).(*corev1.Pod); ok {
					c.DeletePod(p)
				}
			},
		}},
		{typedinformer.New[autoscalingv1beta1.CapacityQuota](cluster.Dynamic, capacityQuotas, 0), cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if q, ok := obj.(*autoscalingv1beta1.CapacityQuota); ok {
					c.SetCapacityQuota(q)
				}
			},
			UpdateFunc: func(_, obj any) {
				if q, ok := obj.(*autoscalingv1beta1.CapacityQuota); ok {
					c.SetCapacityQuota(q)
				}
			},
			DeleteFunc: func(obj any) {
				if q, ok := finalState(obj).(*autoscalingv1beta1.CapacityQuota); ok {
					c.DeleteCapacityQuota(q.Name)
				}
			},
		}},
		{typedinformer.New[schedulingv1beta1.ElasticQuotaTree](cluster.Dynamic, elasticQuotaTrees, 0), cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if tree, ok := obj.(*schedulingv1beta1.ElasticQuotaTree); ok {
					c.SetTree(tree)
				}
			},
			UpdateFunc: func(_, obj any) {
				if tree, ok := obj.(*schedulingv1beta1.ElasticQuotaTree); ok {
					c.SetTree(tree)
				}
			},
			DeleteFunc: func(obj any) {
				if tree, ok := finalState(obj).(*schedulingv1beta1.ElasticQuotaTree); ok {
					c.DeleteTree(tree.Namespace, tree.Name)
				}
			},
		}},
	}
	var synced []cache.InformerSynced
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			t.Fatal(err)
		}
		synced = append(synced, h.informer.HasSynced)
	}
	factory.Start(ctx.Done())
	for _, h := range handlers[2:] {
		go h.informer.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("the invariant checker's informers did not sync")
	}
	t.Cleanup(func() {
		violations, unjudged := c.Verdict()
		if len(violations) > 0 {
			t.Errorf("invariants broken:\n%v", violations)
		}
		if len(unjudged) > 0 {
			t.Logf("reclaims the oracle could not judge, their Preempted event missing:\n%v", unjudged)
		}
		cancel()
		factory.Shutdown()
	})
	return c
}

// Verdict is the oracle's: every broken promise, and the reclaim evictions it
// could not judge. The preemptor of a reclaim is named by the victim's
// Preempted event.
func (c *invariantChecker) Verdict() (violations, unjudged []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Oracle.Verdict(func(victim *corev1.Pod) (types.UID, error) { return preemptorOf(ctx, victim) })
}

// NodesAdded counts the nodes created while the checker watched.
func (c *invariantChecker) NodesAdded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodesAdded
}

// preemptorOf names the pod the scheduler preempted victim for, from the
// victim's Preempted event ("Preempted by pod UID on node NODE", upstream's
// preemption evaluator).
func preemptorOf(ctx context.Context, victim *corev1.Pod) (types.UID, error) {
	events, err := cluster.Client.CoreV1().Events(victim.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "reason=Preempted,involvedObject.uid=" + string(victim.UID)})
	if err != nil {
		return "", fmt.Errorf("events of pod %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	for _, e := range events.Items {
		var uid string
		if _, err := fmt.Sscanf(e.Message, "Preempted by pod %s on node", &uid); err == nil {
			return types.UID(uid), nil
		}
	}
	return "", fmt.Errorf("no Preempted event naming a preemptor among %d", len(events.Items))
}

// finalState unwraps a deletion the informer missed the end of.
func finalState(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
