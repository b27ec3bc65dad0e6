package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	k8sscheduling "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/pkg/typedinformer"
	"github.com/quotascale/quotascale/test/oracle"
)

// invariantChecker feeds the oracle (test/oracle, which shares no code with the
// quota library) every node, pod, CapacityQuota and ElasticQuotaTree event of
// a test's body, and fails the test on every promise it saw broken: nodes over
// a CapacityQuota, pods admitted over a tree node's max, reclaims below min,
// and evictions that are neither reclaims nor scale-down drains.
type invariantChecker struct {
	*oracle.Oracle

	mu sync.Mutex
	// nodesAdded are the nodes created while the checker watched.
	nodesAdded int
	// preemptors are the preemptors named by Preempted events, by victim:
	// recorded as they happen, since the victim's namespace, and its events
	// with it, may be gone by the time the verdict is read.
	preemptors map[types.UID]types.UID
}

// checkers are the running checkers by the name of the test they watch.
var checkers = struct {
	sync.Mutex
	byTest map[string]*invariantChecker
}{byTest: map[string]*invariantChecker{}}

// invariants is the checker watching t: the one of t or of a test t runs
// under, or else a new one for t. Every helper that sets up cluster state for
// a test (testContext, createNamespace, createNodes) calls it, so no test on
// the cluster runs without one.
func invariants(t *testing.T) *invariantChecker {
	t.Helper()
	checkers.Lock()
	defer checkers.Unlock()
	for name := t.Name(); ; {
		if c := checkers.byTest[name]; c != nil {
			return c
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	c := startInvariantChecker(t)
	name := t.Name()
	checkers.byTest[name] = c
	t.Cleanup(func() {
		checkers.Lock()
		defer checkers.Unlock()
		delete(checkers.byTest, name)
	})
	return c
}

// startInvariantChecker watches the cluster while t's body (and its
// subtests) runs. It stops feeding the oracle when t.Context() is cancelled,
// just before t's cleanups run: teardown deletes nodes and namespaces by
// hand, which is no scenario's to be judged by. The verdict is read in
// cleanup.
func startInvariantChecker(t *testing.T) *invariantChecker {
	t.Helper()
	c := &invariantChecker{Oracle: oracle.New(), preemptors: map[types.UID]types.UID{}}
	body := t.Context()
	factory := informers.NewSharedInformerFactory(cluster.Client, 0)
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{factory.Core().V1().Nodes().Informer(), c.nodeHandler()},
		{factory.Core().V1().Pods().Informer(), c.podHandler()},
		{typedinformer.New[autoscalingv1beta1.CapacityQuota](cluster.Dynamic, capacityQuotas, 0), c.capacityQuotaHandler()},
		{typedinformer.New[schedulingv1beta1.ElasticQuotaTree](cluster.Dynamic, elasticQuotaTrees, 0), c.treeHandler()},
		{factory.Scheduling().V1beta1().PodGroups().Informer(), c.podGroupHandler()},
	}
	var synced []cache.InformerSynced
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(whileRunning{body, h.handler}); err != nil {
			t.Fatal(err)
		}
		synced = append(synced, h.informer.HasSynced)
	}
	synced = append(synced, c.watchResourceSlices(t, body, factory))
	synced = append(synced, c.watchClaimsAndClasses(t, body, factory)...)
	// Preempted events are recorded past the body's end: the scheduler
	// reports a preemption after it marked the victim.
	ctx, cancel := context.WithCancel(context.Background())
	events, eventsSynced := c.watchPreemptions(t)
	synced = append(synced, eventsSynced)
	factory.Start(body.Done())
	events.Start(ctx.Done())
	for _, h := range handlers[2:4] {
		go h.informer.Run(body.Done())
	}
	if !cache.WaitForCacheSync(body.Done(), synced...) {
		cancel()
		t.Fatal("the invariant checker's informers did not sync")
	}
	t.Cleanup(func() {
		violations, unjudged := c.Verdict()
		if len(violations) > 0 {
			t.Errorf("invariants broken:\n%v", violations)
		}
		if len(unjudged) > 0 {
			t.Logf("evictions the oracle could not judge:\n%v", unjudged)
		}
		cancel()
		factory.Shutdown()
		events.Shutdown()
	})
	return c
}

// watchPreemptions records, from the Preempted events, which pod preempted
// each victim; the factory is still to be started.
func (c *invariantChecker) watchPreemptions(t *testing.T) (informers.SharedInformerFactory, cache.InformerSynced) {
	events := informers.NewSharedInformerFactoryWithOptions(cluster.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=Preempted"
	}))
	record := func(obj any) {
		if e, ok := obj.(*corev1.Event); ok {
			if preemptor, ok := preemptorNamed(e); ok {
				c.mu.Lock()
				c.preemptors[e.InvolvedObject.UID] = preemptor
				c.mu.Unlock()
			}
		}
	}
	eventInformer := events.Core().V1().Events().Informer()
	if _, err := eventInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	return events, eventInformer.HasSynced
}

// nodeHandler feeds the oracle the nodes, and counts those added after the first list.
func (c *invariantChecker) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
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
			n, ok := finalState(obj).(*corev1.Node)
			switch _, unseen := obj.(cache.DeletedFinalStateUnknown); {
			case ok && unseen:
				c.DeleteNodeUnseen(n.Name)
			case ok:
				c.DeleteNode(n.Name)
			}
		},
	}
}

// watchResourceSlices feeds the oracle the ResourceSlices, whose devices
// count against the device-class limits of CapacityQuotas; the factory is
// still to be started.
func (c *invariantChecker) watchResourceSlices(t *testing.T, body context.Context, factory informers.SharedInformerFactory) cache.InformerSynced {
	set := func(obj any) {
		if s, ok := obj.(*resourcev1.ResourceSlice); ok {
			c.SetResourceSlice(s)
		}
	}
	informer := factory.Resource().V1().ResourceSlices().Informer()
	if _, err := informer.AddEventHandler(whileRunning{body, cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if s, ok := finalState(obj).(*resourcev1.ResourceSlice); ok {
				c.DeleteResourceSlice(s.Name)
			}
		},
	}}); err != nil {
		t.Fatal(err)
	}
	return informer.HasSynced
}

// podHandler feeds the oracle the pods.
func (c *invariantChecker) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
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
	}
}

// capacityQuotaHandler feeds the oracle the CapacityQuotas.
func (c *invariantChecker) capacityQuotaHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
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
	}
}

// treeHandler feeds the oracle the ElasticQuotaTrees.
func (c *invariantChecker) treeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
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
	}
}

// podGroupHandler feeds the oracle the Workload API's PodGroups, which say
// how large a gang is.
func (c *invariantChecker) podGroupHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pg, ok := obj.(*k8sscheduling.PodGroup); ok {
				c.SetPodGroup(pg)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pg, ok := obj.(*k8sscheduling.PodGroup); ok {
				c.SetPodGroup(pg)
			}
		},
		DeleteFunc: func(obj any) {
			if pg, ok := finalState(obj).(*k8sscheduling.PodGroup); ok {
				c.DeletePodGroup(pg.Namespace, pg.Name)
			}
		},
	}
}

// Verdict is the oracle's: every broken promise, and the reclaim evictions it
// could not judge. The preemptor of a reclaim is named by the victim's
// Preempted event, as recorded or, failing that, as listed now.
func (c *invariantChecker) Verdict() (violations, unjudged []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Oracle.Verdict(func(victim *corev1.Pod) (types.UID, error) {
		c.mu.Lock()
		preemptor, ok := c.preemptors[victim.UID]
		c.mu.Unlock()
		if ok {
			return preemptor, nil
		}
		return preemptorOf(ctx, victim)
	})
}

// NodesAdded counts the nodes created while the checker watched.
func (c *invariantChecker) NodesAdded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodesAdded
}

// preemptorOf names the pod the scheduler preempted victim for, from the
// victim's Preempted event.
func preemptorOf(ctx context.Context, victim *corev1.Pod) (types.UID, error) {
	events, err := cluster.Client.CoreV1().Events(victim.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "reason=Preempted,involvedObject.uid=" + string(victim.UID)})
	if err != nil {
		return "", fmt.Errorf("events of pod %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	for i := range events.Items {
		if uid, ok := preemptorNamed(&events.Items[i]); ok {
			return uid, nil
		}
	}
	return "", fmt.Errorf("no Preempted event naming a preemptor among %d", len(events.Items))
}

// preemptorNamed reads the preemptor from a Preempted event's message
// ("Preempted by pod UID on node NODE", upstream's preemption evaluator).
func preemptorNamed(e *corev1.Event) (types.UID, bool) {
	var uid string
	if _, err := fmt.Sscanf(e.Message, "Preempted by pod %s on node", &uid); err != nil || e.Reason != "Preempted" {
		return "", false
	}
	return types.UID(uid), true
}

// whileRunning passes its handler the events that arrive while the body
// runs. It asks at every event, since t's cleanups start as soon as
// t.Context() is cancelled, before the informers have stopped.
type whileRunning struct {
	body context.Context
	cache.ResourceEventHandler
}

func (w whileRunning) OnAdd(obj any, initial bool) {
	if w.body.Err() == nil {
		w.ResourceEventHandler.OnAdd(obj, initial)
	}
}

func (w whileRunning) OnUpdate(old, obj any) {
	if w.body.Err() == nil {
		w.ResourceEventHandler.OnUpdate(old, obj)
	}
}

func (w whileRunning) OnDelete(obj any) {
	if w.body.Err() == nil {
		w.ResourceEventHandler.OnDelete(obj)
	}
}

// finalState unwraps a deletion the informer missed the end of.
func finalState(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
