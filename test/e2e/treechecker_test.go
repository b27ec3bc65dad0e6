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

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// treeChecker watches every pod event and recomputes, with the quota library, the
// usage of each quota node from the pods bound at that moment. It records:
//   - any quota node over its max on any resource;
//   - any pod evicted by a preemption whose leaf is left below its min, unless
//     the preemptor (named by the scheduler's Preempted event) is of the same
//     leaf: priority preemption inside one quota ignores mins by design.
//
// The checker is independent of the scheduler's own bookkeeping: it charges only
// what the API server says is bound.
type treeChecker struct {
	mu         sync.Mutex
	tree       *elastic.Tree
	violations []string
	// belowMin are evictions that left the victim's leaf below its min; they
	// are violations unless the preemptor shares the leaf.
	belowMin  []belowMinEviction
	evictions int
	// namespaceOf every pod seen, to find a preemptor named by UID only.
	namespaceOf map[types.UID]string
}

type belowMinEviction struct {
	victim  *corev1.Pod
	leaf    string
	message string
}

func startTreeChecker(t *testing.T, ctx context.Context, spec *schedulingv1beta1.ElasticQuotaTree) *treeChecker {
	t.Helper()
	tree, err := elastic.Build(spec)
	if err != nil {
		t.Fatalf("checker: %v", err)
	}
	c := &treeChecker{tree: tree, namespaceOf: map[types.UID]string{}}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cluster.Client, 0)
	pods := factory.Core().V1().Pods().Informer()
	_, err = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { c.observe(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			c.gone(obj.(*corev1.Pod))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		if v := c.Violations(); len(v) > 0 {
			t.Errorf("quota invariants broken:\n%v", v)
		}
	})
	return c
}

func (c *treeChecker) observe(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.namespaceOf[pod.UID] = pod.Namespace
	if pod.Spec.NodeName == "" {
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		c.tree.RemovePod(pod.UID)
		return
	}
	if c.tree.AddPod(pod) {
		c.checkMaxLocked()
	}
}

func (c *treeChecker) gone(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tree.RemovePod(pod.UID) || !preemptedByScheduler(pod) {
		return
	}
	c.evictions++
	leaf, _ := c.tree.LeafFor(pod.Namespace)
	fig, _ := c.tree.Figures(leaf.Name())
	for name, req := range resources.PodRequests(pod) {
		min, hasMin := fig.Min[name]
		used := fig.Used[name]
		if hasMin && req.Sign() > 0 && used.Cmp(min) < 0 {
			c.belowMin = append(c.belowMin, belowMinEviction{victim: pod, leaf: leaf.Name(),
				message: fmt.Sprintf("evicting %s/%s left quota node %q at %s %s, below its min %s",
					pod.Namespace, pod.Name, leaf.Name(), name, used.String(), min.String())})
			return
		}
	}
}

// preemptor finds the pod the scheduler preempted victim for, and its leaf,
// from the victim's Preempted event ("Preempted by pod UID on node NODE").
func (c *treeChecker) preemptor(ctx context.Context, victim *corev1.Pod) (pod, leaf string, err error) {
	events, err := cluster.Client.CoreV1().Events(victim.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "reason=Preempted,involvedObject.uid=" + string(victim.UID)})
	if err != nil {
		return "", "", err
	}
	for _, e := range events.Items {
		var uid string
		if _, err := fmt.Sscanf(e.Message, "Preempted by pod %s on node", &uid); err != nil {
			continue
		}
		ns, seen := c.namespaceOf[types.UID(uid)]
		if !seen {
			return "pod " + uid, "", nil
		}
		if n, ok := c.tree.LeafFor(ns); ok {
			return ns + " pod " + uid, n.Name(), nil
		}
		return ns + " pod " + uid, "", nil
	}
	return "", "", fmt.Errorf("no Preempted event with a preemptor among %d", len(events.Items))
}

func (c *treeChecker) checkMaxLocked() {
	for _, n := range c.tree.Nodes() {
		fig, _ := c.tree.Figures(n.Name())
		for name, max := range n.Max() {
			if used := fig.Used[name]; used.Cmp(max) > 0 {
				c.violations = append(c.violations, fmt.Sprintf("quota node %q uses %s %s, over its max %s", n.Name(), name, used.String(), max.String()))
			}
		}
	}
}

// Violations returns what the checker saw break.
func (c *treeChecker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := append([]string(nil), c.violations...)
	for _, e := range c.belowMin {
		pod, leaf, err := c.preemptor(ctx, e.victim)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s (preemptor unknown: %v)", e.message, err))
		case leaf != e.leaf:
			out = append(out, fmt.Sprintf("%s, for %s of quota node %q", e.message, pod, leaf))
		}
	}
	return out
}

// Evictions counts the pods preempted by the scheduler while the checker ran.
func (c *treeChecker) Evictions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evictions
}

func preemptedByScheduler(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue && cond.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}
