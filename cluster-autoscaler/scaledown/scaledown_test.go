package scaledown

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testNode(name string, allocatable corev1.ResourceList, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: allocatable, Capacity: allocatable}}
}

func testPod(name string, requests corev1.ResourceList, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: requests}}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func cpuMem(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func daemonSet(p *corev1.Pod) { p.OwnerReferences[0].Kind = "DaemonSet" }
func mirror(p *corev1.Pod)    { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }

// TestUtilization follows upstream's: cpu or memory, whichever is higher;
// GPU alone on a GPU node, with the GPU threshold; DaemonSet pods counted
// unless --ignore-daemonsets-utilization (upstream's default is false), and
// DaemonSet and mirror pods, when ignored, out of requests and allocatable
// alike; finished pods never count.
func TestUtilization(t *testing.T) {
	opts := Options{UtilizationThreshold: 0.5, GPUUtilizationThreshold: 0.3}
	gpuNode := cpuMem("4", "16Gi")
	gpuNode["nvidia.com/gpu"] = resource.MustParse("4")
	for _, tc := range []struct {
		name          string
		node          *corev1.Node
		pods          []*corev1.Pod
		ignoreDS      bool
		ignoreMirror  bool
		want, wantThr float64
	}{
		{"cpu", testNode("n", cpuMem("4", "16Gi"), nil), []*corev1.Pod{testPod("a", cpuMem("1", "1Gi"), nil)}, false, false, 0.25, 0.5},
		{"memory higher", testNode("n", cpuMem("4", "16Gi"), nil), []*corev1.Pod{testPod("a", cpuMem("1", "8Gi"), nil)}, false, false, 0.5, 0.5},
		{"DaemonSet pods ignored leave allocatable too", testNode("n", cpuMem("4", "16Gi"), nil),
			[]*corev1.Pod{testPod("a", cpuMem("1", "0"), nil), testPod("ds", cpuMem("2", "0"), daemonSet)}, true, false, 0.5, 0.5},
		{"DaemonSet pods count by default", testNode("n", cpuMem("4", "16Gi"), nil),
			[]*corev1.Pod{testPod("a", cpuMem("1", "0"), nil), testPod("ds", cpuMem("2", "0"), daemonSet),
				testPod("done", cpuMem("2", "0"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, false, false, 0.75, 0.5},
		{"mirror pods count by default", testNode("n", cpuMem("4", "16Gi"), nil),
			[]*corev1.Pod{testPod("a", cpuMem("1", "0"), nil), testPod("m", cpuMem("1", "0"), mirror)}, false, false, 0.5, 0.5},
		{"mirror pods ignored", testNode("n", cpuMem("4", "16Gi"), nil),
			[]*corev1.Pod{testPod("a", cpuMem("1", "0"), nil), testPod("m", cpuMem("2", "0"), mirror)}, false, true, 0.5, 0.5},
		{"a GPU node: the GPU alone", testNode("n", gpuNode, nil),
			[]*corev1.Pod{testPod("a", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("1")}, nil)}, false, false, 0.25, 0.3},
		{"a GPU label without the GPU yet", testNode("n", cpuMem("4", "16Gi"), map[string]string{"cluster-api/accelerator": "a100"}),
			[]*corev1.Pod{testPod("a", cpuMem("4", "0"), nil)}, false, false, 0, 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			o.IgnoreDaemonSetsUtilization, o.IgnoreMirrorPodsUtilization = tc.ignoreDS, tc.ignoreMirror
			u, thr := utilization(tc.node, tc.pods, o)
			if u != tc.want || thr != tc.wantThr {
				t.Errorf("utilization %g with threshold %g, want %g and %g", u, thr, tc.want, tc.wantThr)
			}
		})
	}
}

// TestBlockingSystemPod: with --skip-nodes-with-system-pods a kube-system pod
// no budget covers blocks its node for --blocking-system-pod-distruption-timeout
// after its creation, and moves afterwards, as upstream's.
func TestBlockingSystemPod(t *testing.T) {
	opts := Options{SkipNodesWithSystemPods: true, BlockingSystemPodTimeout: time.Hour}
	for _, tc := range []struct {
		age  time.Duration
		want podKind
	}{{30 * time.Minute, podBlocks}, {2 * time.Hour, podMoves}} {
		p := testPod("dns", nil, func(p *corev1.Pod) {
			p.Namespace = metav1.NamespaceSystem
			p.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
		})
		if got, _ := classify(p, nil, nil, opts, now); got != tc.want {
			t.Errorf("a %s old kube-system pod: %v, want %v", tc.age, got, tc.want)
		}
	}
}

func TestDrainGroups(t *testing.T) {
	prio := func(v int32) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.Priority = ptr.To(v) } }
	pods := []*corev1.Pod{testPod("low", nil, prio(-5)), testPod("zero", nil, nil), testPod("mid", nil, prio(1500)), testPod("high", nil, prio(20000))}
	o := config.Options{DrainPriorityConfig: "10000:20,1000:100,0:60", MaxGracefulTerminationSec: 600}
	pairs, err := o.DrainPriorities()
	if err != nil {
		t.Fatal(err)
	}
	a := &Actuator{DrainPriority: pairs}
	var got []string
	for _, g := range a.drainGroups(pods) {
		var names []string
		for _, p := range g.pods {
			names = append(names, p.Name)
		}
		got = append(got, fmt.Sprintf("%s %v", g.grace, names))
	}
	// Lowest priority first; below every pair is the lowest pair's.
	want := []string{"1m0s [low zero]", "1m40s [mid]", "20s [high]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"10000", "a:1", "1:-1", "1:2,3"} {
		o := config.Options{DrainPriorityConfig: bad}
		if _, err := o.DrainPriorities(); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func candidateTaint(at time.Time) corev1.Taint {
	return corev1.Taint{Key: nodetemplate.DeletionCandidateTaint, Value: strconv.FormatInt(at.Unix(), 10), Effect: corev1.TaintEffectPreferNoSchedule}
}

// TestSoftTaints: unneeded nodes get the PreferNoSchedule taint, others lose
// it, untainting first, within the count budget, never a node being deleted.
func TestSoftTaints(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a-unneeded", nil, nil), testNode("b-unneeded", nil, nil), testNode("c-needed-tainted", nil, nil),
		testNode("d-deleting", nil, nil),
	}
	nodes[2].Spec.Taints = []corev1.Taint{candidateTaint(now)}
	nodes[3].Spec.Taints = []corev1.Taint{{Key: nodetemplate.ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	client := fake.NewClientset(nodes[0], nodes[1], nodes[2], nodes[3])
	unneeded := map[string]time.Time{"a-unneeded": now, "b-unneeded": now, "d-deleting": now}
	ctx := context.Background()
	changed, err := UpdateSoftTaints(ctx, client, nodes, unneeded, SoftTaintBudget{Count: 2, Time: time.Minute})
	if err != nil || changed != 2 {
		t.Fatalf("changed %d, %v", changed, err)
	}
	tainted := func() []string {
		var out []string
		for _, n := range nodes {
			got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := DeletionCandidateSince(got); ok {
				out = append(out, n.Name)
			}
		}
		return out
	}
	if diff := cmp.Diff([]string{"a-unneeded"}, tainted()); diff != "" {
		t.Errorf("after one loop of 2 (-want +got):\n%s", diff)
	}
	for i, n := range nodes {
		nodes[i], _ = client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if _, err := UpdateSoftTaints(ctx, client, nodes, unneeded, SoftTaintBudget{Count: 2, Time: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-unneeded", "b-unneeded"}, tainted()); diff != "" {
		t.Errorf("after the second loop (-want +got):\n%s", diff)
	}
}

// TestCleanSoftTaints: with soft tainting off, taints older than the TTL (or
// all with no TTL) are cleaned at start.
func TestCleanSoftTaints(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want []string
	}{{0, nil}, {time.Hour, []string{"recent"}}} {
		recent, old := testNode("recent", nil, nil), testNode("old", nil, nil)
		recent.Spec.Taints = []corev1.Taint{candidateTaint(now.Add(-time.Minute))}
		old.Spec.Taints = []corev1.Taint{candidateTaint(now.Add(-2 * time.Hour))}
		client := fake.NewClientset(recent, old)
		if err := CleanSoftTaints(context.Background(), client, []*corev1.Node{old, recent}, tc.ttl, now); err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, name := range []string{"old", "recent"} {
			n, _ := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if _, ok := DeletionCandidateSince(n); ok {
				left = append(left, name)
			}
		}
		if diff := cmp.Diff(tc.want, left); diff != "" {
			t.Errorf("ttl %s: tainted after cleaning (-want +got):\n%s", tc.ttl, diff)
		}
	}
}

// TestIsExpendableWithoutPriority: a pod without a priority has priority 0,
// as the scheduler and upstream's IsExpendablePod read it, so a cutoff above
// 0 makes it expendable.
func TestIsExpendableWithoutPriority(t *testing.T) {
	p := &corev1.Pod{}
	if IsExpendable(p, 0) || !IsExpendable(p, 1) || IsExpendable(p, -10) {
		t.Errorf("a pod without priority: expendable at cutoff 0 %v, 1 %v, -10 %v; want false, true, false",
			IsExpendable(p, 0), IsExpendable(p, 1), IsExpendable(p, -10))
	}
}
