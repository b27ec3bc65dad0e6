package capacityscheduling

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/processors/elasticquota"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/elastic/elastictest"
)

// TestSchedulerAndAutoscalerAgreeOnTheTree feeds the cluster of elastictest to
// the plugin's cache, as its informers deliver it, and to the autoscaler's
// elasticquota processor, step by step and again from a fresh start at every
// step; each must find the tree in force and the usage elastictest gives.
// kubectl-quota is held to the same answers in its report package.
func TestSchedulerAndAutoscalerAgreeOnTheTree(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	trees := cache.NewStore(cache.MetaNamespaceKeyFunc)
	scheduler := newQuotaCache(corelisters.NewPodLister(pods), testingclock.NewFakeClock(epoch), defaultReclaimHoldDuration)
	autoscaler := elasticquota.New(trees, corelisters.NewPodLister(pods), []string{elastictest.Scheduler})
	for _, step := range elastictest.Steps() {
		deliverPods(t, scheduler, pods, step.Pods)
		if err := trees.Replace(objects(step.Trees), ""); err != nil {
			t.Fatal(err)
		}
		syncTrees(logger, scheduler, step.Trees)
		compare(ctx, t, step, "scheduler", scheduler, autoscaler)

		// Started at this step: the pods are listed before the trees sync.
		freshPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, p := range step.Pods {
			if err := freshPods.Add(p); err != nil {
				t.Fatal(err)
			}
		}
		restarted := newQuotaCache(corelisters.NewPodLister(freshPods), testingclock.NewFakeClock(epoch), defaultReclaimHoldDuration)
		syncTrees(logger, restarted, step.Trees)
		compare(ctx, t, step, "restarted scheduler", restarted,
			elasticquota.New(trees, corelisters.NewPodLister(freshPods), []string{elastictest.Scheduler}))
	}
}

// deliverPods updates the pod informer's store to pods and delivers the
// changes to the cache, as the informer's handlers do.
func deliverPods(t *testing.T, c *quotaCache, store cache.Indexer, pods []*corev1.Pod) {
	t.Helper()
	present := map[types.UID]bool{}
	for _, p := range pods {
		present[p.UID] = true
		if err := store.Update(p); err != nil {
			t.Fatal(err)
		}
		c.updatePod(nil, p)
	}
	for _, obj := range store.List() {
		if p := obj.(*corev1.Pod); !present[p.UID] {
			if err := store.Delete(p); err != nil {
				t.Fatal(err)
			}
			c.deletePod(p)
		}
	}
}

func syncTrees(logger klog.Logger, c *quotaCache, trees []*schedulingv1beta1.ElasticQuotaTree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncTreesLocked(logger, append([]*schedulingv1beta1.ElasticQuotaTree(nil), trees...))
}

func objects(trees []*schedulingv1beta1.ElasticQuotaTree) []any {
	out := make([]any, 0, len(trees))
	for _, t := range trees {
		out = append(out, t)
	}
	return out
}

func compare(ctx context.Context, t *testing.T, step elastictest.Step, name string, c *quotaCache, p *elasticquota.Processor) {
	t.Helper()
	c.mu.Lock()
	scheduler := inForceFigures(c.lifecycle.inForce.Generation, c.tree)
	c.mu.Unlock()
	inForce, err := p.TreeInForce(ctx)
	if err != nil {
		t.Fatalf("%s: processor: %v", step.Name, err)
	}
	autoscaler := inForceFigures(inForce.Generation, inForce.Tree)
	if diff := elastictest.Diff(step.Want, scheduler); diff != "" {
		t.Errorf("%s: %s (-want +got):\n%s", step.Name, name, diff)
	}
	if diff := elastictest.Diff(scheduler, autoscaler); diff != "" {
		t.Errorf("%s: the processor beside the %s (-%s +processor):\n%s", step.Name, name, name, diff)
	}
}

func inForceFigures(generation int64, tree *elastic.Tree) elastictest.InForce {
	out := elastictest.InForce{Nodes: map[string]elastictest.Node{}}
	if tree == nil {
		return out
	}
	out.Generation = generation
	for _, s := range tree.Status() {
		out.Nodes[s.Name] = elastictest.Node{Used: s.Used, Min: s.Min, Max: s.Max}
	}
	return out
}
