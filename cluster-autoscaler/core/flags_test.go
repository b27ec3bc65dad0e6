package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

func template(mutate func(n *corev1.Node, pods *[]*corev1.Pod)) *cloudprovider.NodeInfo {
	n := node("t", "g", "4", "16Gi")
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	n.Labels["topology.kubernetes.io/zone"] = "a"
	var pods []*corev1.Pod
	if mutate != nil {
		mutate(n, &pods)
	}
	return &cloudprovider.NodeInfo{Node: n, Pods: pods}
}

// TestSimilarity follows upstream's comparator: capacity equal but memory
// within 1.5%, allocatable and free within 5%, labels equal but the ignored
// ones, taints not compared; --balancing-label alone decides when set.
func TestSimilarity(t *testing.T) {
	base := template(nil)
	for _, tc := range []struct {
		name    string
		opts    func(o *config.Options)
		other   func(n *corev1.Node, pods *[]*corev1.Pod)
		similar bool
	}{
		{name: "the same shape in another zone", other: func(n *corev1.Node, _ *[]*corev1.Pod) { n.Labels["topology.kubernetes.io/zone"] = "b" }, similar: true},
		{name: "memory 1% smaller", other: func(n *corev1.Node, _ *[]*corev1.Pod) {
			q := resource.MustParse("16221Mi") // 16384Mi less 1%
			n.Status.Capacity[corev1.ResourceMemory], n.Status.Allocatable[corev1.ResourceMemory] = q, q
		}, similar: true},
		{name: "memory 2% smaller", other: func(n *corev1.Node, _ *[]*corev1.Pod) {
			q := resource.MustParse("16056Mi")
			n.Status.Capacity[corev1.ResourceMemory], n.Status.Allocatable[corev1.ResourceMemory] = q, q
		}},
		{name: "memory 2% smaller with --memory-difference-ratio=0.03", opts: func(o *config.Options) { o.MemoryDifferenceRatio = 0.03 },
			other: func(n *corev1.Node, _ *[]*corev1.Pod) {
				q := resource.MustParse("16056Mi")
				n.Status.Capacity[corev1.ResourceMemory], n.Status.Allocatable[corev1.ResourceMemory] = q, q
			}, similar: true},
		{name: "one more cpu", other: func(n *corev1.Node, _ *[]*corev1.Pod) {
			n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("5")
		}},
		{name: "a GPU the other lacks", other: func(n *corev1.Node, _ *[]*corev1.Pod) { n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("1") }},
		{name: "allocatable cpu 4% lower", other: func(n *corev1.Node, _ *[]*corev1.Pod) {
			n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3840m")
		}, similar: true},
		{name: "allocatable cpu 10% lower", other: func(n *corev1.Node, _ *[]*corev1.Pod) {
			n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3600m")
		}},
		{name: "allocatable cpu 10% lower with --max-allocatable-difference-ratio=0.2 and --max-free-difference-ratio=0.2",
			opts: func(o *config.Options) { o.MaxAllocatableDifferenceRatio, o.MaxFreeDifferenceRatio = 0.2, 0.2 },
			other: func(n *corev1.Node, _ *[]*corev1.Pod) {
				n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3600m")
			}, similar: true},
		{name: "DaemonSet pods take 10% more cpu", other: func(_ *corev1.Node, pods *[]*corev1.Pod) {
			*pods = append(*pods, testPod("kube-system", "ds", "ds", "400m", ""))
		}},
		{name: "another label value", other: func(n *corev1.Node, _ *[]*corev1.Pod) { n.Labels["tier"] = "gold" }},
		{name: "another label value, ignored by --balancing-ignore-label", opts: func(o *config.Options) { o.BalancingIgnoreLabels = []string{"tier"} },
			other: func(n *corev1.Node, _ *[]*corev1.Pod) { n.Labels["tier"] = "gold" }, similar: true},
		{name: "another taint", other: func(n *corev1.Node, _ *[]*corev1.Pod) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
		}, similar: true},
		{name: "--balancing-label: the label alone decides", opts: func(o *config.Options) { o.BalancingLabels = []string{"group"} },
			other: func(n *corev1.Node, _ *[]*corev1.Pod) {
				n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("64")
			}, similar: true},
		{name: "--balancing-label: a different value", opts: func(o *config.Options) { o.BalancingLabels = []string{"group"} },
			other: func(n *corev1.Node, _ *[]*corev1.Pod) { n.Labels["group"] = "h" }},
		{name: "--balancing-label: missing on one", opts: func(o *config.Options) { o.BalancingLabels = []string{"pool"} },
			other: func(n *corev1.Node, _ *[]*corev1.Pod) { n.Labels["pool"] = "x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := config.Defaults()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			other := template(tc.other)
			s := newSimilarity(opts)
			if got := s.similar(base, other); got != tc.similar {
				t.Errorf("similar %v, want %v", got, tc.similar)
			}
			if got := s.similar(other, base); got != tc.similar {
				t.Errorf("reversed: similar %v, want %v", got, tc.similar)
			}
		})
	}
}

// groupsFixture is groups with no node, and pending pods of cpu each.
func groupsFixture(groups []*fakeGroup, pending int, cpu string) *loopFixture {
	f := &loopFixture{provider: &fakeProvider{groups: groups}}
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := 0; i < pending; i++ {
		_ = podIdx.Add(testPod("ns", "pending-"+string(rune('a'+i)), "rs", cpu, ""))
	}
	f.pods = corelisters.NewPodLister(podIdx)
	f.nodes = corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	return f
}

func runLoop(t *testing.T, f *loopFixture, opts func(o *config.Options)) *Autoscaler {
	t.Helper()
	a := newTestAutoscaler(t, f)
	if opts != nil {
		opts(&a.opts)
	}
	a.similarity = newSimilarity(a.opts)
	// The status is kept in lastStatus; nothing is written.
	a.WriteStatus = func(context.Context, api.Status, time.Time) error { return nil }
	if err := a.RunOnce(context.Background(), time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestEnforceNodeGroupMinSize(t *testing.T) {
	for _, enforce := range []bool{false, true} {
		f := groupsFixture([]*fakeGroup{{id: "g", min: 3, max: 10, template: node("t", "g", "4", "16Gi")}}, 0, "")
		runLoop(t, f, func(o *config.Options) { o.EnforceNodeGroupMinSize = enforce })
		want := 0
		if enforce {
			want = 3
		}
		if got := f.provider.groups[0].target; got != want {
			t.Errorf("--enforce-node-group-min-size=%v: target %d, want %d", enforce, got, want)
		}
	}
}

// TestParallelScaleUp: of two balanced groups the first fails; one after
// another the second is not tried, in parallel it grows.
func TestParallelScaleUp(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		var groups []*fakeGroup
		for _, zone := range []string{"a", "b"} {
			tmpl := node("t-"+zone, "zone-"+zone, "4", "16Gi")
			tmpl.Labels["topology.kubernetes.io/zone"] = zone
			delete(tmpl.Labels, "group")
			groups = append(groups, &fakeGroup{id: "zone-" + zone, max: 10, template: tmpl})
		}
		groups[0].fail = errors.New("stockout")
		f := groupsFixture(groups, 4, "3")
		runLoop(t, f, func(o *config.Options) { o.BalanceSimilarNodeGroups, o.ParallelScaleUp = true, parallel })
		want := map[string]int{"zone-a": 0, "zone-b": 0}
		if parallel {
			want["zone-b"] = 2
		}
		if diff := cmp.Diff(want, targets(f)); diff != "" {
			t.Errorf("--parallel-scale-up=%v: targets (-want +got):\n%s", parallel, diff)
		}
		if groups[1].increased != map[bool]int{false: 0, true: 1}[parallel] {
			t.Errorf("--parallel-scale-up=%v: the second group was resized %d times", parallel, groups[1].increased)
		}
	}
}

func TestScaleFromUnschedulable(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		tmpl := node("t", "g", "4", "16Gi")
		tmpl.Spec.Unschedulable = true
		f := groupsFixture([]*fakeGroup{{id: "g", max: 10, template: tmpl}}, 1, "1")
		runLoop(t, f, func(o *config.Options) { o.ScaleFromUnschedulable = ignore })
		if got, want := f.provider.groups[0].target, map[bool]int{false: 0, true: 1}[ignore]; got != want {
			t.Errorf("--scale-from-unschedulable=%v: target %d, want %d", ignore, got, want)
		}
	}
}

func TestAllowedSchedulerNames(t *testing.T) {
	for _, allowed := range [][]string{nil, {"default-scheduler"}, {"batch"}} {
		f := groupsFixture([]*fakeGroup{{id: "g", max: 10, template: node("t", "g", "4", "16Gi")}}, 1, "1")
		pods, _ := f.pods.List(labels.Everything())
		pods[0].Spec.SchedulerName = "batch"
		runLoop(t, f, func(o *config.Options) { o.AllowedSchedulerNames = allowed })
		want := 1
		if len(allowed) == 1 && allowed[0] == "default-scheduler" {
			want = 0
		}
		if got := f.provider.groups[0].target; got != want {
			t.Errorf("--allowed-scheduler-names=%v: target %d, want %d", allowed, got, want)
		}
	}
}

// TestScaleUpFromZero: with no ready node, false waits; true (upstream's
// default) scales up for the pending pod.
func TestScaleUpFromZero(t *testing.T) {
	for _, fromZero := range []bool{false, true} {
		f := groupsFixture([]*fakeGroup{{id: "g", max: 10, template: node("t", "g", "4", "16Gi")}}, 1, "1")
		a := runLoop(t, f, func(o *config.Options) { o.ScaleUpFromZero = fromZero })
		if got, want := f.provider.groups[0].target, map[bool]int{false: 0, true: 1}[fromZero]; got != want {
			t.Errorf("--scale-up-from-zero=%v: target %d, want %d", fromZero, got, want)
		}
		if got, want := a.initializing != "", !fromZero; got != want {
			t.Errorf("--scale-up-from-zero=%v: initializing %q", fromZero, a.initializing)
		}
	}
}

// TestUnhealthyClusterScalesNothing: 5 of 10 nodes unready is more than 3 and
// more than 45%: the loop scales nothing, as upstream's.
func TestUnhealthyClusterScalesNothing(t *testing.T) {
	for _, unready := range []int{4, 5} {
		f := newLoopFixture(10, 1, 2, 5)
		nodes, _ := f.nodes.List(labels.Everything())
		for _, n := range nodes[:unready] {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		before := targets(f)
		a := runLoop(t, f, nil)
		grew := !cmp.Equal(before, targets(f))
		if want := unready == 4; grew != want {
			t.Errorf("%d of 10 unready: grew %v, want %v", unready, grew, want)
		}
		if got := a.lastStatus.ClusterWide.Health.Status; got != map[bool]string{true: "Healthy", false: "Unhealthy"}[unready == 4] {
			t.Errorf("%d of 10 unready: status %s", unready, got)
		}
	}
}

// TestMaxBinpackingTime: past --max-binpacking-time no further node group is
// estimated, so only the first of two groups (in id order) can be chosen;
// --max-nodegroup-binpacking-duration past adds no node to an estimate.
func TestMaxBinpackingTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(o *config.Options)
		want map[string]int
	}{
		// least-waste picks the 4-cpu group b for 3-cpu pods when it sees it.
		{"no bound", nil, map[string]int{"a-16cpu": 0, "b-4cpu": 2}},
		{"--max-binpacking-time=1ns", func(o *config.Options) { o.MaxBinpackingTime = time.Nanosecond }, map[string]int{"a-16cpu": 1, "b-4cpu": 0}},
		{"--max-nodegroup-binpacking-duration=1ns", func(o *config.Options) { o.MaxNodeGroupBinpackingDuration = time.Nanosecond }, map[string]int{"a-16cpu": 0, "b-4cpu": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := groupsFixture([]*fakeGroup{
				{id: "a-16cpu", max: 10, template: node("ta", "a-16cpu", "16", "64Gi")},
				{id: "b-4cpu", max: 10, template: node("tb", "b-4cpu", "4", "16Gi")},
			}, 2, "3")
			runLoop(t, f, tc.opts)
			if diff := cmp.Diff(tc.want, targets(f)); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}
