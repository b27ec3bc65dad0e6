package core

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/expander"
	"github.com/quotascale/quotascale/cluster-autoscaler/metrics"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/processors"
)

// loopFixture is a cluster held in listers, with no API server: what one loop
// reads, built once.
type loopFixture struct {
	provider *fakeProvider
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
}

func node(name, group string, cpu, memory string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "group": group}},
		Spec:       corev1.NodeSpec{ProviderID: "fake://" + group + "/" + name},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func testPod(ns, name, owner, cpu, nodeName string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(0, 0)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner,
				UID: types.UID(owner), Controller: ptrTrue()}},
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		},
	}
	if nodeName == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	} else {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

func ptrTrue() *bool { t := true; return &t }

// newLoopFixture builds nodes x podsPerNode bound pods spread over groups, and
// pending pods of 20 deployments that fill no existing node.
func newLoopFixture(nodes, podsPerNode, groups, pending int) *loopFixture {
	f := &loopFixture{provider: &fakeProvider{}}
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for g := 0; g < groups; g++ {
		id := fmt.Sprintf("group-%03d", g)
		// Shapes differ so the expander has a real choice.
		cpu := fmt.Sprint(8 + 8*(g%4))
		f.provider.groups = append(f.provider.groups, &fakeGroup{id: id, max: 1000, template: node("template-"+id, id, cpu, "64Gi")})
	}
	for n := 0; n < nodes; n++ {
		g := f.provider.groups[n%groups]
		name := fmt.Sprintf("node-%05d", n)
		_ = nodeIdx.Add(node(name, g.id, g.template.Status.Capacity.Cpu().String(), "64Gi"))
		g.instances = append(g.instances, cloudprovider.Instance{Id: "fake://" + g.id + "/" + name,
			Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
		g.target++
		for p := 0; p < podsPerNode; p++ {
			// Bound pods fill each node's cpu.
			cpu := fmt.Sprintf("%dm", g.template.Status.Capacity.Cpu().MilliValue()/int64(podsPerNode))
			_ = podIdx.Add(testPod(fmt.Sprintf("ns-%d", n%50), fmt.Sprintf("bound-%d-%d", n, p), fmt.Sprintf("rs-bound-%d", n%200), cpu, name))
		}
	}
	for p := 0; p < pending; p++ {
		_ = podIdx.Add(testPod(fmt.Sprintf("ns-%d", p%50), fmt.Sprintf("pending-%d", p), fmt.Sprintf("rs-pending-%d", p%20), "1", ""))
	}
	f.nodes = corelisters.NewNodeLister(nodeIdx)
	f.pods = corelisters.NewPodLister(podIdx)
	return f
}

func newTestAutoscaler(tb testing.TB, f *loopFixture, limiters ...processors.ScaleUpLimiter) *Autoscaler {
	tb.Helper()
	cfg, err := simulator.DefaultSchedulerConfig(nil)
	if err != nil {
		tb.Fatal(err)
	}
	client := fake.NewClientset()
	fw, err := simulator.NewFramework(context.Background(), simulator.FrameworkOptions{
		Config: cfg, Client: client, Informers: informers.NewSharedInformerFactory(client, 0),
	})
	if err != nil {
		tb.Fatal(err)
	}
	strategy, err := expander.New(context.Background(), "least-waste", expander.Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	opts := config.Defaults()
	return New(opts, Deps{
		Provider: f.provider, Nodes: f.nodes, Pods: f.pods, Framework: fw, Expander: strategy,
		Metrics: metrics.New(metrics.Options{}), Limiters: limiters,
	})
}

// loopSize is one cluster size of the P3 benchmarks.
type loopSize struct{ nodes, podsPerNode, groups, pending int }

func (s loopSize) String() string {
	return fmt.Sprintf("nodes=%d/pods=%d/groups=%d/pending=%d", s.nodes, s.nodes*s.podsPerNode, s.groups, s.pending)
}

// largeLoops says whether the P3 benchmarks also run at 5,000 and 15,000
// nodes: BENCH_LARGE=1, as make bench-large sets. Building the 15,000-node
// fixture alone takes tens of seconds and gigabytes.
func largeLoops() bool { return os.Getenv("BENCH_LARGE") == "1" }

// loopSizes are the P3 sizes, 30 pods a node, a group per 10 nodes and a
// pending pod per 2 nodes up to 5,000 nodes; the largest size keeps 5,000
// pending pods over 1,500 groups.
func loopSizes() []loopSize {
	sizes := []loopSize{{100, 30, 10, 50}, {500, 30, 50, 250}, {1000, 30, 100, 500}}
	if largeLoops() {
		sizes = append(sizes, loopSize{5000, 30, 500, 2500}, loopSize{15000, 30, 1500, 5000})
	}
	return sizes
}

// BenchmarkRunOnce is one full loop on a snapshot: refresh, accounting,
// simulation of the pending pods against existing, upcoming and template
// nodes, estimation and the expander's choice.
func BenchmarkRunOnce(b *testing.B) {
	for _, size := range loopSizes() {
		b.Run(size.String(), func(b *testing.B) {
			benchLoops(b, newLoopFixture(size.nodes, size.podsPerNode, size.groups, size.pending))
		})
	}
}

// benchLoops times b.N loops of an autoscaler over f, each from the same cloud.
func benchLoops(b *testing.B, f *loopFixture) {
	a := newTestAutoscaler(b, f)
	// Loop logs would interleave with the benchmark's result lines.
	ctx := klog.NewContext(context.Background(), logr.Discard())
	now := time.Unix(1000, 0)
	warmUp(b, ctx, a, f, now)
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := processCPU()
		if err := a.RunOnce(ctx, now); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - start
		// Every loop starts from the same cloud: undo the increase.
		b.StopTimer()
		resetTargets(f)
		b.StartTimer()
	}
	b.StopTimer()
	reportCPU(b, cpu)
	reportLiveHeap(b, a, f)
}

// warmUp runs one loop before the timed ones, as a running autoscaler has
// run the loops before: what the autoscaler keeps from one loop to the next
// (the nodes' NodeInfos) is then as warm as in every loop but its first.
func warmUp(b *testing.B, ctx context.Context, a *Autoscaler, f *loopFixture, now time.Time) {
	b.Helper()
	if err := a.RunOnce(ctx, now); err != nil {
		b.Fatal(err)
	}
	resetTargets(f)
}

// reportCPU reports the process CPU time per loop, in seconds: on a machine
// other work shares, it varies far less than the loop's wall time.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// reportLiveHeap reports the heap still in use after the loops, once
// collected: the listers' nodes and pods (what the autoscaler's informers
// hold) and whatever the autoscaler keeps from one loop to the next. With
// B/op, what a loop allocates on top, it sizes the autoscaler's memory. keep
// are the autoscaler and its fixture, which must still be live when the heap
// is read.
func reportLiveHeap(b *testing.B, keep ...any) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "live-MB")
	runtime.KeepAlive(keep)
}

func resetTargets(f *loopFixture) {
	nodes, _ := f.nodes.List(labels.Everything())
	perGroup := map[string]int{}
	for _, n := range nodes {
		perGroup[n.Labels["group"]]++
	}
	for _, g := range f.provider.groups {
		g.target = perGroup[g.id]
		g.instances = g.instances[:g.target]
	}
}
