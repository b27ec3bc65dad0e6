package scaledown

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

type group struct {
	cloudprovider.NodeGroup
}

func (group) Id() string   { return "g" }
func (group) MinSize() int { return 0 }

func newPlanner(t *testing.T, opts Options) *Planner {
	t.Helper()
	cfg, err := simulator.DefaultSchedulerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	fw, err := simulator.NewFramework(context.Background(), simulator.FrameworkOptions{
		Config: cfg, Client: client, Informers: informers.NewSharedInformerFactory(client, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return NewPlanner(opts, fw)
}

func readyNode(name string) *corev1.Node {
	n := testNode(name, cpuMem("4", "16Gi"), map[string]string{corev1.LabelHostname: name})
	n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func input(nodes []*corev1.Node, pods []*corev1.Pod, at time.Time) Input {
	return Input{Now: at, Nodes: nodes, Pods: pods, Targets: map[string]int{"g": len(nodes)}, MayRemove: true,
		GroupOf: func(*corev1.Node) cloudprovider.NodeGroup { return group{} }}
}

func keptReasons(p Plan) map[string]string {
	out := map[string]string{}
	for _, k := range p.Kept {
		out[k.Node.Name] = k.Reason.MessageID
	}
	return out
}

// TestUnremovableRecheck: a node kept by a pod that cannot move is left
// alone for --unremovable-node-recheck-timeout, then checked again.
func TestUnremovableRecheck(t *testing.T) {
	p := newPlanner(t, Options{Enabled: true, UtilizationThreshold: 0.5, UnneededTime: time.Hour, UnremovableRecheckTimeout: 5 * time.Minute, MaxEmptyBulkDelete: 10})
	nodes := []*corev1.Node{readyNode("a"), readyNode("b")}
	bare := testPod("bare", cpuMem("100m", "0"), func(p *corev1.Pod) { p.OwnerReferences = nil; p.Spec.NodeName = "a" })
	ctx := context.Background()
	for _, step := range []struct {
		after time.Duration
		want  string
	}{
		{0, "no.scale.down.node.NotReplicated"},
		{time.Minute, "no.scale.down.node.RecentlyUnremovable"},
		{6 * time.Minute, "no.scale.down.node.NotReplicated"},
	} {
		plan, err := p.Plan(ctx, input(nodes, []*corev1.Pod{bare}, now.Add(step.after)))
		if err != nil {
			t.Fatal(err)
		}
		if got := keptReasons(plan)["a"]; got != step.want {
			t.Errorf("after %s: node a kept for %q, want %q", step.after, got, step.want)
		}
	}
}

// TestDeletionCandidateTTL: at the first loop a node's unneeded time comes
// from its DeletionCandidate taint when the taint is younger than the TTL.
func TestDeletionCandidateTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl         time.Duration
		wantRemoved bool
	}{{0, false}, {time.Hour, true}} {
		p := newPlanner(t, Options{Enabled: true, UtilizationThreshold: 0.5, UnneededTime: 5 * time.Minute, DeletionCandidateTTL: tc.ttl, MaxEmptyBulkDelete: 10})
		a, b := readyNode("a"), readyNode("b")
		a.Spec.Taints = []corev1.Taint{candidateTaint(now.Add(-10 * time.Minute))}
		plan, err := p.Plan(context.Background(), input([]*corev1.Node{a, b}, nil, now))
		if err != nil {
			t.Fatal(err)
		}
		var removed []string
		for _, r := range plan.Removals {
			removed = append(removed, r.Node.Name)
		}
		want := []string(nil)
		if tc.wantRemoved {
			want = []string{"a"}
		}
		if diff := cmp.Diff(want, removed); diff != "" {
			t.Errorf("--node-deletion-candidate-ttl=%s: removed (-want +got):\n%s", tc.ttl, diff)
		}
	}
}

// TestSimulationTimeout: past --scale-down-simulation-timeout the candidates
// left are skipped and not unneeded.
func TestSimulationTimeout(t *testing.T) {
	p := newPlanner(t, Options{Enabled: true, UtilizationThreshold: 0.5, UnneededTime: time.Hour, SimulationTimeout: time.Nanosecond})
	plan, err := p.Plan(context.Background(), input([]*corev1.Node{readyNode("a"), readyNode("b")}, nil, now))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.UnneededNodes) != 0 || !cmp.Equal(plan.Skipped, []string{"a", "b"}) {
		t.Errorf("unneeded %v, skipped %v; want none unneeded, both skipped", plan.UnneededNodes, plan.Skipped)
	}
}

// TestPlanLimits: --max-scale-down-parallelism caps the removals of one loop,
// --max-empty-bulk-delete the empty ones among them; an unready node waits for
// --scale-down-unready-time, or stays with --scale-down-unready-enabled=false;
// with --scale-down-delay-type-local a group in its own delay loses no node.
func TestPlanLimits(t *testing.T) {
	mkNodes := func(n int, ready corev1.ConditionStatus) []*corev1.Node {
		var out []*corev1.Node
		for i := 0; i < n; i++ {
			node := readyNode(fmt.Sprintf("n%d", i))
			node.Status.Conditions[0].Status = ready
			out = append(out, node)
		}
		return out
	}
	base := Options{Enabled: true, UtilizationThreshold: 0.5, MaxEmptyBulkDelete: 10, MaxParallelism: 10, MaxDrainParallelism: 1,
		UnreadyEnabled: true, UnreadyTime: time.Hour}
	now := time.Unix(10000, 0)
	for _, tc := range []struct {
		name    string
		opts    func(*Options)
		ready   corev1.ConditionStatus
		removed int
	}{
		{"five empty nodes, parallelism 10", func(*Options) {}, corev1.ConditionTrue, 5},
		{"--max-scale-down-parallelism=2", func(o *Options) { o.MaxParallelism = 2 }, corev1.ConditionTrue, 2},
		{"--max-empty-bulk-delete=3", func(o *Options) { o.MaxEmptyBulkDelete = 3 }, corev1.ConditionTrue, 3},
		{"unready, within --scale-down-unready-time", func(*Options) {}, corev1.ConditionFalse, 0},
		{"unready, past --scale-down-unready-time", func(o *Options) { o.UnreadyTime = 0 }, corev1.ConditionFalse, 5},
		{"unready, --scale-down-unready-enabled=false", func(o *Options) { o.UnreadyEnabled, o.UnreadyTime = false, 0 }, corev1.ConditionFalse, 0},
		{"the group in its own delay, --scale-down-delay-type-local", func(*Options) {}, corev1.ConditionTrue, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := base
			tc.opts(&opts)
			nodes := mkNodes(5, tc.ready)
			in := input(nodes, nil, now)
			if strings.Contains(tc.name, "its own delay") {
				in.GroupInDelay = func(id string) bool { return id == "g" }
			}
			plan, err := newPlanner(t, opts).Plan(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Removals) != tc.removed {
				t.Errorf("%d removals, want %d (kept %v)", len(plan.Removals), tc.removed, plan.Kept)
			}
		})
	}
}
