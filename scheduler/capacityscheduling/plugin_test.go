package capacityscheduling

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// teamsTree: two teams with a guaranteed min of 8 cpu each out of 16, and a
// spot leaf pinned to the spot ResourceFlavor.
const teamsTree = `
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: 8}, max: {cpu: 16}}
    - {name: team-b, namespaces: [team-b], min: {cpu: 8}, max: {cpu: 16}}
    - {name: spot, namespaces: [spot], max: {cpu: 4}, attributes: {resourceflavors: spot}}
`

// fourLow are four low-priority 2-cpu pods of namespace on node n1, the oldest
// first: DefaultPreemption reprieves older pods first, so the youngest, low-4,
// is the one it evicts for 2 cpu.
func fourLow(namespace string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 1; i <= 4; i++ {
		out = append(out, testPod(fmt.Sprintf("%s-low-%d", namespace, i), namespace, "2", "n1", low, time.Duration(5-i)*time.Hour))
	}
	return out
}

func TestPreFilter(t *testing.T) {
	spotFlavor := flavor("spot", map[string]string{"pool": "spot"})
	tests := []struct {
		name     string
		world    world
		pod      *corev1.Pod
		mutate   func(*harness)
		wantCode fwk.Code
		wantMsg  string
		// wantLeaf is the leaf PreFilter recorded; empty when it recorded no state.
		wantLeaf string
	}{{
		name:     "no tree: not governed",
		world:    world{nodes: []*corev1.Node{node("n1", "8")}},
		pod:      testPod("p", "team-a", "2", "", high, 0),
		wantCode: fwk.Skip,
	}, {
		name:     "a namespace no leaf lists: not governed",
		world:    world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "8")}},
		pod:      testPod("p", "default", "2", "", high, 0),
		wantCode: fwk.Skip,
	}, {
		name:     "admitted, no flavor: nothing for Filter to do",
		world:    world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "8")}, pods: fourLow("team-a")},
		pod:      testPod("p", "team-a", "8", "", high, 0),
		wantCode: fwk.Skip,
		wantLeaf: "team-a",
	}, {
		name:  "refused: every quota node over max, with the numbers",
		world: world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "16")}, pods: append(fourLow("team-a"), fourLow("team-b")...)},
		pod:   testPod("p", "team-a", "10", "", high, 0),
		// team-a 8 + 10 > 16, root 16 + 10 > 16.
		wantCode: fwk.UnschedulableAndUnresolvable,
		wantMsg:  `exceeded elastic quota "team-a": cpu used 8, requested 10, max 16; exceeded elastic quota "root": cpu used 16, requested 10, max 16`,
		wantLeaf: "team-a",
	}, {
		name:     "admitted with a flavor that exists: Filter pins the pod",
		world:    world{tree: teamsTree, flavors: []*kueuev1beta1.ResourceFlavor{spotFlavor}, nodes: []*corev1.Node{node("n1", "8")}},
		pod:      testPod("p", "spot", "2", "", high, 0),
		wantCode: fwk.Success,
		wantLeaf: "spot",
	}, {
		name:     "a flavor that does not exist",
		world:    world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "8")}},
		pod:      testPod("p", "spot", "2", "", high, 0),
		wantCode: fwk.UnschedulableAndUnresolvable,
		wantMsg:  `ResourceFlavor "spot" of quota node "spot" does not exist`,
		wantLeaf: "spot",
	}, {
		// The scale-down simulation clears the node of the pod it moves. The
		// leaf's max is 4: charged twice, it would be refused.
		name:     "a charged pod, moved by the autoscaler's scale-down simulation, is not charged twice",
		world:    world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "8")}, pods: []*corev1.Pod{testPod("big", "spot", "4", "n1", low, 0)}},
		pod:      testPod("big", "spot", "4", "", low, 0),
		wantCode: fwk.UnschedulableAndUnresolvable, // only because the flavor is missing: quota admitted it
		wantMsg:  `ResourceFlavor "spot" of quota node "spot" does not exist`,
		wantLeaf: "spot",
	}, {
		name:     "usage not yet rebuilt after a start: nothing is decided",
		world:    world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "8")}},
		pod:      testPod("p", "team-a", "2", "", high, 0),
		mutate:   func(h *harness) { h.plugin.podsReady = func() bool { return false } },
		wantCode: fwk.UnschedulableAndUnresolvable,
		wantMsg:  "quota usage is being rebuilt from the assigned pods",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.world)
			if tt.mutate != nil {
				tt.mutate(h)
			}
			state := framework.NewCycleState()
			_, status := h.plugin.PreFilter(h.ctx, state, tt.pod, nil)
			if status.Code() != tt.wantCode || status.Message() != tt.wantMsg {
				t.Errorf("PreFilter = %v %q, want %v %q", status.Code(), status.Message(), tt.wantCode, tt.wantMsg)
			}
			s, err := readState(state)
			gotLeaf := ""
			if err == nil {
				gotLeaf = s.verdict.Leaf
			}
			if gotLeaf != tt.wantLeaf {
				t.Errorf("state's leaf %q, want %q", gotLeaf, tt.wantLeaf)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	h := newHarness(t, world{
		tree:    teamsTree,
		flavors: []*kueuev1beta1.ResourceFlavor{flavor("spot", map[string]string{"pool": "spot", "arch": "arm64"})},
		nodes:   []*corev1.Node{node("n1", "8")},
	})
	spotNode := node("spot-1", "8")
	spotNode.Labels = map[string]string{"pool": "spot", "arch": "arm64", "zone": "a"}
	halfSpot := node("half", "8")
	halfSpot.Labels = map[string]string{"pool": "spot"}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		node     *corev1.Node
		wantCode fwk.Code
		wantMsg  string
	}{
		{"every flavor label", testPod("p", "spot", "1", "", low, 0), spotNode, fwk.Success, ""},
		{"one flavor label missing", testPod("p", "spot", "1", "", low, 0), halfSpot, fwk.UnschedulableAndUnresolvable,
			`node(s) didn't match ResourceFlavor "spot" of quota node "spot"`},
		{"no flavor: any node", testPod("p", "team-a", "1", "", low, 0), halfSpot, fwk.Success, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			h.plugin.PreFilter(h.ctx, state, tt.pod, nil)
			info := framework.NewNodeInfo()
			info.SetNode(tt.node)
			status := h.plugin.Filter(h.ctx, state, tt.pod, info)
			if status.Code() != tt.wantCode || status.Message() != tt.wantMsg {
				t.Errorf("Filter = %v %q, want %v %q", status.Code(), status.Message(), tt.wantCode, tt.wantMsg)
			}
		})
	}
	if status := h.plugin.Filter(h.ctx, framework.NewCycleState(), testPod("p", "spot", "1", "", low, 0), framework.NewNodeInfo()); status.Code() != fwk.Error {
		t.Errorf("Filter without PreFilter state = %v, want an error", status)
	}
}

// usedCPU is a quota node's cpu usage as the plugin counts it.
func (h *harness) usedCPU(node string) string {
	h.plugin.cache.mu.Lock()
	defer h.plugin.cache.mu.Unlock()
	used, _ := h.plugin.cache.tree.Used(node)
	q := used[corev1.ResourceCPU]
	return q.String()
}

func TestReserve(t *testing.T) {
	type step struct {
		do  string
		pod *corev1.Pod
		// from is the version an "update" step's pod follows.
		from     *corev1.Pod
		wantCode fwk.Code
		// wantUsed is team-a's cpu after the step.
		wantUsed string
	}
	pending := testPod("p", "team-a", "6", "", high, 0)
	other := testPod("other", "team-a", "6", "n1", high, 0)
	bound := func(p *corev1.Pod) *corev1.Pod {
		b := p.DeepCopy()
		b.Spec.NodeName = "n1"
		return b
	}
	resized := pending.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests = cpuList("4")
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "Reserve charges, Unreserve releases",
		steps: []step{
			{do: "reserve", pod: pending, wantUsed: "6"},
			{do: "unreserve", pod: pending, wantUsed: "0"},
		},
	}, {
		name: "a pod charged since PreFilter is re-checked at Reserve",
		steps: []step{
			{do: "prefilter", pod: pending, wantUsed: "0"},
			{do: "informer", pod: other, wantUsed: "6"},
			{do: "prefilter", pod: testPod("q", "team-a", "6", "", high, 0), wantUsed: "6"},
			{do: "informer", pod: testPod("third", "team-a", "6", "n1", high, 0), wantUsed: "12"},
			// 12 + 6 > 16: refused now, though PreFilter admitted it.
			{do: "reserve-only", pod: testPod("q", "team-a", "6", "", high, 0), wantCode: fwk.Unschedulable, wantUsed: "12"},
		},
	}, {
		name: "the binding of a reserved pod keeps its charge",
		steps: []step{
			{do: "reserve", pod: pending, wantUsed: "6"},
			{do: "update", from: pending, pod: bound(pending), wantUsed: "6"},
		},
	}, {
		name: "a pod whose requests changed after Reserve is charged its new requests once bound",
		steps: []step{
			{do: "reserve", pod: pending, wantUsed: "6"},
			{do: "update", from: pending, pod: resized, wantUsed: "6"},
			{do: "update", from: resized, pod: bound(resized), wantUsed: "4"},
		},
	}, {
		name: "a pod no tree governs is not charged",
		steps: []step{
			{do: "reserve", pod: testPod("free", "default", "6", "", high, 0), wantUsed: "0"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}})
			states := map[string]fwk.CycleState{}
			for i, s := range tt.steps {
				var status *fwk.Status
				switch s.do {
				case "prefilter":
					states[s.pod.Name], _ = h.preFilter(s.pod)
				case "reserve":
					states[s.pod.Name], _ = h.preFilter(s.pod)
					status = h.reserveAssumed(states[s.pod.Name], s.pod, "n1")
				case "reserve-only":
					status = h.reserveAssumed(states[s.pod.Name], s.pod, "n1")
				case "unreserve":
					h.unreserveAssumed(states[s.pod.Name], s.pod, "n1")
				case "informer":
					h.plugin.cache.updatePod(nil, s.pod)
				case "update":
					h.plugin.cache.updatePod(s.from, s.pod)
				}
				if status.Code() != s.wantCode {
					t.Errorf("step %d (%s %s): %v, want %v", i, s.do, s.pod.Name, status, s.wantCode)
				}
				if got := h.usedCPU("team-a"); got != s.wantUsed {
					t.Errorf("step %d (%s %s): team-a used %s, want %s", i, s.do, s.pod.Name, got, s.wantUsed)
				}
			}
		})
	}
}

// TestHolds follows the quota a reclaim holds for its preemptor: taken when
// the victims are chosen, replaced by the preemptor's own charge while it is
// reserved, put back when its binding fails, and given up when it is bound,
// or by the sweep once it is older than the hold's lifetime.
func TestHolds(t *testing.T) {
	preemptor := testPod("preemptor", "team-a", "4", "", high, 0)
	victim := testPod("victim", "team-b", "4", "n1", low, time.Hour)
	tests := []struct {
		name string
		// steps run in order; used is team-a's cpu after each.
		steps []string
		used  []string
	}{
		{"bound", []string{"hold", "reserve", "bound"}, []string{"4", "4", "4"}},
		{"binding fails, the hold stays", []string{"hold", "reserve", "unreserve"}, []string{"4", "4", "4"}},
		{"binding fails, then the sweep after the hold's lifetime", []string{"hold", "reserve", "unreserve", "sweep-early", "sweep-late"}, []string{"4", "4", "4", "4", "0"}},
		{"the preemptor deleted", []string{"hold", "deleted"}, []string{"4", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}, pods: []*corev1.Pod{victim, preemptor}})
			state, _ := h.preFilter(preemptor)
			for i, step := range tt.steps {
				switch step {
				case "hold":
					h.plugin.cache.startHold(preemptor, "team-a", cpuList("4"), []*corev1.Pod{victim})
				case "reserve":
					if status := h.reserveAssumed(state, preemptor, "n1"); !status.IsSuccess() {
						t.Fatalf("Reserve: %v", status)
					}
				case "unreserve":
					h.unreserveAssumed(state, preemptor, "n1")
				case "bound":
					bound := preemptor.DeepCopy()
					bound.Spec.NodeName = "n1"
					h.plugin.cache.updatePod(nil, bound)
				case "deleted":
					h.plugin.cache.deletePod(preemptor)
				case "sweep-early":
					h.clock.Step(h.plugin.cache.holdFor)
					h.sweepHolds()
				case "sweep-late":
					h.clock.Step(time.Second)
					h.sweepHolds()
				}
				if got := h.usedCPU("team-a"); got != tt.used[i] {
					t.Errorf("after %s: team-a used %s, want %s", step, got, tt.used[i])
				}
			}
		})
	}
}

// TestExpiredHoldActivatesThePodsItKeptOut: when a hold expires, the pending
// pods it alone kept out go back to the active queue, since no cluster event
// tells the queue that the quota came free; pods still refused without it,
// pods no tree governs and the preemptor itself (whose own hold never
// refused it) stay where they are.
func TestExpiredHoldActivatesThePodsItKeptOut(t *testing.T) {
	// root (16) runs 12 of team-b's; the hold charges 4 more.
	preemptor := testPod("preemptor", "team-a", "4", "", high, 0)
	victim := testPod("victim", "team-b", "4", "n1", low, time.Hour)
	keptOut := testPod("kept-out", "team-a", "2", "", low, 0)
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}, pods: []*corev1.Pod{
		testPod("b-1", "team-b", "8", "n1", low, time.Hour), victim, preemptor, keptOut,
		testPod("too-big", "team-a", "6", "", low, 0),
		testPod("ungoverned", "elsewhere", "100", "", low, 0),
	}})
	h.plugin.cache.startHold(preemptor, "team-a", cpuList("4"), []*corev1.Pod{victim})
	if _, status := h.preFilter(keptOut); status.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter(kept-out) with the hold charged: %v, want refused", status)
	}

	h.clock.Step(h.plugin.cache.holdFor)
	h.plugin.sweepHolds(h.ctx)
	if got := h.activatedPods(); len(got) != 0 {
		t.Errorf("activated %v before the hold expired", got)
	}
	h.clock.Step(time.Second)
	h.plugin.sweepHolds(h.ctx)
	if diff := cmp.Diff([]string{"team-a/kept-out"}, h.activatedPods()); diff != "" {
		t.Errorf("activated when the hold expired (-want +got):\n%s", diff)
	}
	if _, status := h.preFilter(keptOut); !status.IsSuccess() {
		t.Errorf("PreFilter(kept-out) after the hold expired: %v, want admitted", status)
	}
}

// borrowerTree: team-b's min is 4, so what it runs above 4 is borrowed.
const borrowerTree = `
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: 8}, max: {cpu: 16}}
    - {name: team-b, namespaces: [team-b], min: {cpu: 4}, max: {cpu: 16}}
`

func TestPostFilter(t *testing.T) {
	// smallTree fits one 8-cpu node: whoever runs above 4 borrows.
	const smallTree = `
spec:
  root:
    name: root
    min: {cpu: 8}
    max: {cpu: 8}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: 4}, max: {cpu: 8}}
    - {name: team-b, namespaces: [team-b], min: {cpu: 4}, max: {cpu: 8}}
`
	eight := []*corev1.Node{node("n1", "8")}
	never := testPod("p", "team-a", "2", "", high, 0)
	never.Spec.PreemptionPolicy = new(corev1.PreemptNever)
	mixed := []*corev1.Pod{
		testPod("a-1", "team-a", "2", "n1", low, 10*time.Hour),
		testPod("a-2", "team-a", "2", "n1", low, 9*time.Hour),
		testPod("b-1", "team-b", "2", "n1", low, 8*time.Hour),
		testPod("b-2", "team-b", "2", "n1", low, 7*time.Hour),
		testPod("b-3", "team-b", "2", "n1", low, 6*time.Hour),
	}
	tests := []struct {
		name          string
		world         world
		pod           *corev1.Pod
		mutate        func(*harness)
		wantCode      fwk.Code
		wantNominated string
		wantVictims   []string
		// wantHeld is team-a's cpu after PostFilter, when set.
		wantHeld string
	}{{
		name:          "no tree: DefaultPreemption",
		world:         world{nodes: eight, pods: fourLow("team-b")},
		pod:           testPod("p", "team-a", "2", "", high, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"team-b-low-4"},
	}, {
		// System pods live outside any tree: they preempt governed pods as
		// upstream's scheduler lets them.
		name:          "a pod outside the tree preempts as DefaultPreemption would, governed pods included",
		world:         world{tree: teamsTree, nodes: eight, pods: fourLow("team-b")},
		pod:           testPod("p", "kube-system", "2", "", high, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"team-b-low-4"},
	}, {
		name:          "inside one leaf: lower-priority pods of the leaf",
		world:         world{tree: teamsTree, nodes: eight, pods: fourLow("team-a")},
		pod:           testPod("p", "team-a", "2", "", high, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"team-a-low-4"},
	}, {
		name:     "not the pods of another leaf at its min",
		world:    world{tree: teamsTree, nodes: eight, pods: fourLow("team-b")},
		pod:      testPod("p", "team-a", "2", "", high, 0),
		wantCode: fwk.Unschedulable,
	}, {
		name:          "a pod of another leaf that only borrowed",
		world:         world{tree: borrowerTree, nodes: eight, pods: fourLow("team-b")},
		pod:           testPod("p", "team-a", "2", "", high, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"team-b-low-4"},
	}, {
		// DefaultPreemption alone would reprieve the oldest pods, team-a's,
		// and evict b-2 and b-3, taking team-b from 6 to 2, below its min of 4.
		name:          "several pods of another leaf that would go below its min together: the leaf's own instead",
		world:         world{tree: borrowerTree, nodes: []*corev1.Node{node("n1", "10")}, pods: mixed},
		pod:           testPod("p", "team-a", "4", "", high, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"a-1", "a-2"},
	}, {
		name:          "pods outside the tree",
		world:         world{tree: teamsTree, nodes: eight, pods: fourLow("default")},
		pod:           testPod("p", "team-a", "2", "", high, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"default-low-4"},
	}, {
		name:     "only lower priorities",
		world:    world{tree: teamsTree, nodes: eight, pods: fourLow("team-a")},
		pod:      testPod("p", "team-a", "2", "", low, 0),
		wantCode: fwk.Unschedulable,
	}, {
		name:     "preemptionPolicy Never",
		world:    world{tree: teamsTree, nodes: eight, pods: fourLow("team-a")},
		pod:      never,
		wantCode: fwk.Unschedulable,
	}, {
		name:          "refused by quota: reclaim from the leaf that borrows, and hold the room",
		world:         world{tree: smallTree, nodes: eight, pods: fourLow("team-b")},
		pod:           testPod("p", "team-a", "2", "", low, 0),
		wantCode:      fwk.Success,
		wantNominated: "n1",
		wantVictims:   []string{"team-b-low-4"},
		wantHeld:      "2",
	}, {
		name: "refused by quota past the leaf's min: no reclaim",
		world: world{tree: smallTree, nodes: eight, pods: append(fourLow("team-b")[:2],
			testPod("a-1", "team-a", "2", "n1", low, time.Hour), testPod("a-2", "team-a", "2", "n1", low, time.Hour))},
		pod:      testPod("p", "team-a", "2", "", low, 0),
		wantCode: fwk.Unschedulable,
		wantHeld: "4",
	}, {
		name:     "usage not yet rebuilt: nothing preempts",
		world:    world{tree: teamsTree, nodes: eight, pods: fourLow("team-a")},
		pod:      testPod("p", "team-a", "2", "", high, 0),
		mutate:   func(h *harness) { h.plugin.podsReady = func() bool { return false } },
		wantCode: fwk.Unschedulable,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.world.pods = append(tt.world.pods, tt.pod)
			h := newHarness(t, tt.world)
			if tt.mutate != nil {
				tt.mutate(h)
			}
			state, _ := h.preFilter(tt.pod)
			result, status := h.plugin.PostFilter(h.ctx, state, tt.pod, h.unschedulableEverywhere(tt.world.nodes))
			if status.Code() != tt.wantCode {
				t.Errorf("PostFilter = %v, want %v", status, tt.wantCode)
			}
			nominated := ""
			if result != nil && result.NominatingInfo != nil {
				nominated = result.NominatedNodeName
			}
			if nominated != tt.wantNominated {
				t.Errorf("nominated %q, want %q (status %v)", nominated, tt.wantNominated, status)
			}
			if diff := cmp.Diff(tt.wantVictims, h.victims()); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if tt.wantHeld != "" {
				if got := h.usedCPU("team-a"); got != tt.wantHeld {
					t.Errorf("team-a used %s after PostFilter, want %s", got, tt.wantHeld)
				}
			}
		})
	}
}

// TestPreFilterFollowsPodUpdates: PreFilter reuses a pod's requests only for
// the same pod object. A new version of the pod (another request), or another
// tree, is judged afresh.
func TestPreFilterFollowsPodUpdates(t *testing.T) {
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}})
	small := testPod("p", "team-a", "2", "", high, 0)
	big := small.DeepCopy()
	big.Spec.Containers[0].Resources.Requests = cpuList("20")
	for i, tc := range []struct {
		pod  *corev1.Pod
		want fwk.Code
	}{{small, fwk.Skip}, {small, fwk.Skip}, {big, fwk.UnschedulableAndUnresolvable}, {small, fwk.Skip}} {
		if _, status := h.plugin.PreFilter(h.ctx, framework.NewCycleState(), tc.pod, nil); status.Code() != tc.want {
			t.Errorf("attempt %d: PreFilter = %v, want %v", i, status, tc.want)
		}
	}
	// A tree whose team-a max is 1: the cached request is converted again.
	h.plugin.cache.mu.Lock()
	tree, err := h.plugin.cache.tree.Rebuild(treeObject(t, strings.Replace(teamsTree, "min: {cpu: 8}, max: {cpu: 16}}\n    - {name: team-b", "max: {cpu: 1}}\n    - {name: team-b", 1)))
	if err != nil {
		t.Fatal(err)
	}
	h.plugin.cache.tree = tree
	h.plugin.cache.mu.Unlock()
	if _, status := h.plugin.PreFilter(h.ctx, framework.NewCycleState(), small, nil); status.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("after the tree changed: PreFilter = %v, want a refusal", status)
	}
}

// TestPreFilterForgetsRequests: the requests PreFilter remembers for a pending
// pod are dropped once the informer sees it bound or deleted, with or without a
// tree in force, and a charged pod the autoscaler's scale-down simulation moves
// (a copy) is never remembered, so the memory holds pending pods only.
func TestPreFilterForgetsRequests(t *testing.T) {
	bound := testPod("bound", "team-a", "2", "n1", low, 0)
	pending := testPod("pending", "team-a", "1", "", high, 0)
	deleted := testPod("deleted", "team-a", "1", "", high, 0)
	orphan := testPod("orphan", "team-b", "1", "", high, 0)
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}, pods: []*corev1.Pod{bound, pending, deleted, orphan}})
	remembered := func() []string {
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		var out []string
		for uid := range h.plugin.cache.requests {
			out = append(out, string(uid))
		}
		sort.Strings(out)
		return out
	}
	// until polls for the informer to deliver what the test wrote.
	until := func(what string, done func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return done(), nil
		})
		if err != nil {
			t.Fatalf("%s: %v; remembered %v", what, err, remembered())
		}
	}
	bindPod := func(p *corev1.Pod) {
		t.Helper()
		p = p.DeepCopy()
		p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
		if _, err := h.client.CoreV1().Pods(p.Namespace).Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("binding %s: %v", p.Name, err)
		}
	}

	moved := bound.DeepCopy()
	moved.Spec.NodeName = ""
	for _, p := range []*corev1.Pod{moved, pending, deleted, orphan} {
		if _, status := h.plugin.PreFilter(h.ctx, framework.NewCycleState(), p, nil); status.Code() != fwk.Skip {
			t.Fatalf("PreFilter(%s) = %v, want admitted", p.Name, status)
		}
	}
	if diff := cmp.Diff([]string{"deleted", "orphan", "pending"}, remembered()); diff != "" {
		t.Errorf("remembered after PreFilter (-want +got):\n%s", diff)
	}

	bindPod(pending)
	if err := h.client.CoreV1().Pods(deleted.Namespace).Delete(h.ctx, deleted.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s: %v", deleted.Name, err)
	}
	until("forgetting the bound and the deleted pod", func() bool { return cmp.Equal([]string{"orphan"}, remembered()) })

	// The tree is withdrawn while orphan is pending; binding it (by another
	// scheduler, say) still drops what was remembered.
	if err := h.trees.Resource(treesResource).Namespace(schedulingv1beta1.EnforcedNamespace).Delete(h.ctx, "elasticquotatree", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the tree: %v", err)
	}
	until("withdrawing the tree", func() bool {
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		return h.plugin.cache.tree == nil
	})
	bindPod(orphan)
	until("forgetting the pod bound without a tree", func() bool { return len(remembered()) == 0 })
}

// TestPendingPodRequestsComputedOnDelivery: the informer's delivery of a pending
// pod of a governed namespace computes its requests, so its first scheduling
// attempt finds them with the very object the scheduler's queue holds and does
// not compute them again. A pod no tree governs is not remembered.
func TestPendingPodRequestsComputedOnDelivery(t *testing.T) {
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}})
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		return h.plugin.cache.tree != nil, nil
	}); err != nil {
		t.Fatalf("waiting for the tree: %v", err)
	}
	// The ungoverned pod is created first: the informer delivers in order, so
	// by the time the governed one is remembered, the other has been seen.
	ungoverned := testPod("ungoverned", "elsewhere", "1", "", high, 0)
	governed := testPod("governed", "team-a", "1500m", "", high, 0)
	for _, p := range []*corev1.Pod{ungoverned, governed} {
		if _, err := h.client.CoreV1().Pods(p.Namespace).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", p.Name, err)
		}
	}
	var delivered *corev1.Pod
	var remembered podRequests
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		listed, err := h.plugin.cache.podLister.Pods(governed.Namespace).Get(governed.Name)
		if err != nil {
			return false, nil
		}
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		delivered, remembered = listed, h.plugin.cache.requests[governed.UID]
		return remembered.pod == delivered, nil
	}); err != nil {
		t.Fatalf("the informer's object of %s was never remembered: %v", governed.Name, err)
	}
	if got := remembered.request.Requests()[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1500m")) != 0 {
		t.Errorf("remembered cpu = %s, want 1500m", got.String())
	}
	h.plugin.cache.mu.Lock()
	_, ungovernedRemembered := h.plugin.cache.requests[ungoverned.UID]
	h.plugin.cache.mu.Unlock()
	if ungovernedRemembered {
		t.Errorf("requests of %s, which no tree governs, were remembered", ungoverned.Name)
	}

	if _, status := h.plugin.PreFilter(h.ctx, framework.NewCycleState(), delivered, nil); status.Code() != fwk.Skip {
		t.Fatalf("PreFilter(%s) = %v, want admitted", governed.Name, status)
	}
	h.plugin.cache.mu.Lock()
	after := h.plugin.cache.requests[governed.UID]
	h.plugin.cache.mu.Unlock()
	if reflect.ValueOf(after.request.Requests()).UnsafePointer() != reflect.ValueOf(remembered.request.Requests()).UnsafePointer() {
		t.Errorf("PreFilter computed the requests of %s again instead of using those computed on delivery", governed.Name)
	}
}
