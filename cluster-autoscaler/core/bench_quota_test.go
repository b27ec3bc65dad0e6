package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/processors/capacityquota"
)

// BenchmarkRunOnceWithQuotas is BenchmarkRunOnce with the CapacityQuota
// processor checking every scale-up against quotas each over two groups, with
// room for about one more node per group: 50 quotas up to 1,000 nodes, then
// one per two groups, so that every group stays under a quota. quota-% is the
// share of the loop spent in the processor (StartLoop, Headroom and Planned).
func BenchmarkRunOnceWithQuotas(b *testing.B) {
	for _, size := range loopSizes() {
		quotas := max(50, size.groups/2)
		b.Run(fmt.Sprintf("%v/quotas=%d", size, quotas), func(b *testing.B) {
			f := newLoopFixture(size.nodes, size.podsPerNode, size.groups, size.pending)
			limiter := &timedLimiter{inner: newQuotaProcessor(b, f, quotas)}
			a := newTestAutoscaler(b, f, limiter)
			// Loop logs would interleave with the benchmark's result lines.
			ctx := klog.NewContext(context.Background(), logr.Discard())
			now := time.Unix(1000, 0)
			warmUp(b, ctx, a, f, now)
			limiter.spent, limiter.limited = 0, 0
			var loops, cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start, startCPU := time.Now(), processCPU()
				if err := a.RunOnce(ctx, now); err != nil {
					b.Fatal(err)
				}
				loops += time.Since(start)
				cpu += processCPU() - startCPU
				b.StopTimer()
				resetTargets(f)
				b.StartTimer()
			}
			if limiter.limited == 0 {
				b.Fatal("no quota limited a scale-up; the benchmark would not exercise the processor's refusals")
			}
			b.StopTimer()
			b.ReportMetric(100*limiter.spent.Seconds()/loops.Seconds(), "quota-%")
			reportCPU(b, cpu)
			reportLiveHeap(b, a, f)
		})
	}
}

// newQuotaProcessor returns the CapacityQuota processor fed with the fixture's
// nodes through an informer, as in the autoscaler, and quota i selecting
// groups 2i and 2i+1 with one node's cpu of headroom each.
func newQuotaProcessor(b *testing.B, f *loopFixture, quotas int) *capacityquota.Processor {
	b.Helper()
	nodes, err := f.nodes.List(labels.Everything())
	if err != nil {
		b.Fatal(err)
	}
	informer := cache.NewSharedIndexInformer(listThenIdle{&cache.ListWatch{
		ListFunc: func(metav1.ListOptions) (runtime.Object, error) {
			list := &corev1.NodeList{}
			for _, n := range nodes {
				list.Items = append(list.Items, *n)
			}
			return list, nil
		},
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}}, &corev1.Node{}, 0, cache.Indexers{})
	m := metrics.New(metrics.Options{})
	var objects []*autoscalingv1beta1.CapacityQuota
	groups := f.provider.groups
	for i := 0; i < quotas; i++ {
		a, c := groups[(2*i)%len(groups)], groups[(2*i+1)%len(groups)]
		cpu := a.template.Status.Capacity.Cpu().Value()*int64(a.target+1) + c.template.Status.Capacity.Cpu().Value()*int64(c.target+1)
		objects = append(objects, &autoscalingv1beta1.CapacityQuota{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("quota-%02d", i), ResourceVersion: "1"},
			Spec: autoscalingv1beta1.CapacityQuotaSpec{
				Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: "group", Operator: metav1.LabelSelectorOpIn, Values: []string{a.id, c.id}}}},
				Limits: autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{
					"cpu": *resource.NewQuantity(cpu, resource.DecimalSI)}},
			},
		})
	}
	p, err := capacityquota.New(capacityquota.Options{Enabled: true},
		func() ([]*autoscalingv1beta1.CapacityQuota, error) { return objects, nil },
		informer, &record.FakeRecorder{}, capacityquota.NewMetrics(m.Registry, m.SkippedScaleEvents))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("node informer did not sync")
	}
	return p
}

// listThenIdle lists, then watches nothing; a list, not a watch-list stream,
// is what it serves first.
type listThenIdle struct{ *cache.ListWatch }

func (listThenIdle) IsWatchListSemanticsUnSupported() bool { return true }

// timedLimiter adds up the time spent in a limiter, and counts the scale-ups
// it capped.
type timedLimiter struct {
	inner   processors.ScaleUpLimiter
	spent   time.Duration
	limited int
}

func (t *timedLimiter) StartLoop(ctx context.Context, lc *processors.LoopContext) error {
	defer t.time(time.Now())
	return t.inner.StartLoop(ctx, lc)
}

func (t *timedLimiter) Headroom(ctx context.Context, lc *processors.LoopContext, group cloudprovider.NodeGroup, template *corev1.Node, wanted int) (int, []processors.Reason) {
	defer t.time(time.Now())
	allowed, reasons := t.inner.Headroom(ctx, lc, group, template, wanted)
	if allowed < wanted {
		t.limited++
	}
	return allowed, reasons
}

func (t *timedLimiter) Planned(ctx context.Context, lc *processors.LoopContext, group cloudprovider.NodeGroup, template *corev1.Node, count int) {
	defer t.time(time.Now())
	t.inner.Planned(ctx, lc, group, template, count)
}

func (t *timedLimiter) time(start time.Time) { t.spent += time.Since(start) }
