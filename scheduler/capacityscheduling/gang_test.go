package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/quota/gang"
)

// gangTree: team-a may use 8 cpu at most; team-b borrows up to the root's 16.
const gangTree = `
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: 8}, max: {cpu: 8}}
    - {name: team-b, namespaces: [team-b], min: {cpu: 4}, max: {cpu: 16}}
`

// ackGang is a gang of n pending pods of namespace, each asking cpu, marked
// with ACK's labels: name, and min-available minAvailable.
func ackGang(namespace, name, minAvailable string, n int, cpu string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 1; i <= n; i++ {
		p := testPod(fmt.Sprintf("%s-%d", name, i), namespace, cpu, "", low, time.Duration(n-i)*time.Minute)
		p.Labels = map[string]string{gang.LabelName: name, gang.LabelMinAvailable: minAvailable}
		out = append(out, p)
	}
	return out
}

// gangHarness is the harness with the gang's pods delivered by the informer.
func gangHarness(t *testing.T, tree string, pods ...*corev1.Pod) *harness {
	t.Helper()
	return newHarness(t, world{tree: tree, nodes: []*corev1.Node{node("n1", "32")}, pods: pods})
}

// reserve runs PreFilter and Reserve for pod, as a scheduling cycle that
// found it node n1 does: Reserve gets the assumed copy.
func (h *harness) reserve(pod *corev1.Pod) (fwk.CycleState, *fwk.Status) {
	h.t.Helper()
	state, status := h.preFilter(pod)
	if !status.IsSuccess() && status.Code() != fwk.Skip {
		return state, status
	}
	return state, h.reserveAssumed(state, pod, "n1")
}

func bound(pod *corev1.Pod) *corev1.Pod {
	b := pod.DeepCopy()
	b.Spec.NodeName = "n1"
	b.Status.Phase = corev1.PodRunning
	return b
}

func TestGangRefusedWhole(t *testing.T) {
	const tree6 = `
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: team-a, namespaces: [team-a], max: {cpu: 6}}
    - {name: team-b, namespaces: [team-b], max: {cpu: 16}}
`
	pods := ackGang("team-a", "job", "4", 4, "2")
	h := gangHarness(t, tree6, pods...)
	for _, p := range pods {
		_, status := h.preFilter(p)
		if status.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("PreFilter(%s) = %v, want UnschedulableAndUnresolvable", p.Name, status)
		}
		for _, want := range []string{"gang team-a/job of 4 pods", `"team-a"`, "cpu", "requested 8", "max 6"} {
			if !strings.Contains(status.Message(), want) {
				t.Errorf("PreFilter(%s) message %q does not name %q", p.Name, status.Message(), want)
			}
		}
	}
	if got := h.usedCPU("team-a"); got != "0" {
		t.Errorf("team-a used %s after the gang was refused, want 0", got)
	}
	// Each pod alone fits: a pod-by-pod plugin would have admitted three.
	if v := h.plugin.cache.tree.Admit("team-a", cpuList("2")); !v.Admitted() {
		t.Fatalf("one pod alone refused: %s", v.Message())
	}
}

// TestGangReservation follows one gang through a scheduling of all its
// members: the first reserves the whole gang, the others take their share of
// it, and usage never moves while the gang fills up.
func TestGangReservation(t *testing.T) {
	job := ackGang("team-a", "job", "4", 4, "2")
	other := ackGang("team-a", "other", "4", 4, "2")
	h := gangHarness(t, gangTree, append(append([]*corev1.Pod{}, job...), other...)...)

	states := map[string]fwk.CycleState{}
	for i, p := range job {
		state, status := h.reserve(p)
		if !status.IsSuccess() {
			t.Fatalf("reserving %s: %v", p.Name, status)
		}
		states[p.Name] = state
		if got := h.usedCPU("team-a"); got != "8" {
			t.Errorf("after reserving %s: team-a used %s, want the whole gang's 8", p.Name, got)
		}
		permit := h.permitAssumed(state, p, "n1")
		if wantWait := i < 3; permit.Code() == fwk.Wait != wantWait {
			t.Errorf("Permit(%s) = %v, want waiting %v", p.Name, permit, wantWait)
		}
		if i == 0 {
			// The other gang asks for 8 more in a leaf of 8: refused whole.
			if _, status := h.preFilter(other[0]); status.Code() != fwk.UnschedulableAndUnresolvable {
				t.Errorf("the second gang's first pod: %v, want refused while the first gang holds the leaf", status)
			}
		}
	}
	for _, p := range job {
		h.plugin.cache.updatePod(nil, bound(p))
	}
	if got := h.usedCPU("team-a"); got != "8" {
		t.Errorf("gang bound: team-a used %s, want 8", got)
	}
	h.plugin.cache.mu.Lock()
	open := len(h.plugin.cache.reservations)
	h.plugin.cache.mu.Unlock()
	if open != 0 {
		t.Errorf("%d reservations left once the gang is bound, want none", open)
	}
	// A fifth member, beyond min-available, is judged alone: 2 more than 8.
	extra := ackGang("team-a", "job", "4", 5, "2")[4]
	h.plugin.cache.updatePod(nil, extra)
	if _, status := h.preFilter(extra); status.Code() != fwk.UnschedulableAndUnresolvable || strings.Contains(status.Message(), "gang") {
		t.Errorf("a member past min-available: %v, want refused alone", status)
	}
}

// TestGangWaitEnds: a gang whose members leave before it is whole releases
// all it held once the last one goes, and the gangs quota refused are moved
// back to the active queue.
func TestGangWaitEnds(t *testing.T) {
	job := ackGang("team-a", "job", "4", 4, "2")
	other := ackGang("team-a", "other", "4", 4, "2")
	h := gangHarness(t, gangTree, append(append([]*corev1.Pod{}, job...), other...)...)
	var states []fwk.CycleState
	for _, p := range job[:2] {
		state, status := h.reserve(p)
		if !status.IsSuccess() {
			t.Fatalf("reserving %s: %v", p.Name, status)
		}
		states = append(states, state)
	}
	if _, status := h.preFilter(other[0]); status.IsSuccess() {
		t.Fatal("the second gang admitted while the first holds the leaf")
	}
	h.unreserveAssumed(states[0], job[0], "n1")
	if got := h.usedCPU("team-a"); got != "8" {
		t.Errorf("one member left: team-a used %s, want the reservation's 8 still", got)
	}
	h.unreserveAssumed(states[1], job[1], "n1")
	if got := h.usedCPU("team-a"); got != "0" {
		t.Errorf("every member left: team-a used %s, want 0", got)
	}
	if diff := cmp.Diff([]string{"team-a/other-1", "team-a/other-2", "team-a/other-3", "team-a/other-4"}, h.activatedPods()); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
	if _, status := h.preFilter(other[0]); !status.IsSuccess() {
		t.Errorf("the second gang after the first let go: %v", status)
	}
}

func TestGangBadInput(t *testing.T) {
	tests := []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"min-available missing", ackGang("team-a", "job", "", 1, "1"), "label is missing"},
		{"min-available zero", ackGang("team-a", "job", "0", 1, "1"), "0 is not positive"},
		{"min-available not a number", ackGang("team-a", "job", "four", 1, "1"), `"four" is not a whole number`},
		{"fewer pods than min-available", ackGang("team-a", "job", "4", 3, "1"), "has 3 of its 4 pods"},
		{"a PodGroup the scheduler cannot see", func() []*corev1.Pod {
			p := testPod("p", "team-a", "1", "", low, 0)
			name := "train"
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
			return []*corev1.Pod{p}
		}(), "PodGroup not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := gangHarness(t, gangTree, tt.pods...)
			state, status := h.preFilter(tt.pods[0])
			if status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), tt.want) {
				t.Errorf("PreFilter = %v, want UnschedulableAndUnresolvable naming %q", status, tt.want)
			}
			if _, status := h.plugin.PostFilter(h.ctx, state, tt.pods[0], h.unschedulableEverywhere([]*corev1.Node{node("n1", "32")})); status.Code() != fwk.UnschedulableAndUnresolvable {
				t.Errorf("PostFilter = %v, want no reclaim", status)
			}
			if got := h.usedCPU("team-a"); got != "0" {
				t.Errorf("team-a used %s, want 0", got)
			}
		})
	}
}

// TestGangReclaim: reclaim for a gang plans for the whole gang: it evicts
// enough for all of it, and nothing when the whole gang cannot be made to
// fit, even though one of its pods alone could.
// lentTree is a root of 16 cpu where team-a's min is MIN and team-b, whose
// min is 4, may borrow the rest.
const lentTree = `
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: team-a, namespaces: [team-a], min: {cpu: MIN}, max: {cpu: 16}}
    - {name: team-b, namespaces: [team-b], min: {cpu: 4}, max: {cpu: 16}}
`

func TestGangReclaim(t *testing.T) {
	var borrowers []*corev1.Pod
	for i := 1; i <= 8; i++ {
		borrowers = append(borrowers, testPod(fmt.Sprintf("b-%d", i), "team-b", "2", "n1", low, time.Duration(10-i)*time.Hour))
	}
	tests := []struct {
		name        string
		min         string
		gang        []*corev1.Pod
		wantCode    fwk.Code
		wantVictims []string
		wantHeld    string
	}{{
		name:        "the whole gang within the leaf's min: as many victims as the gang needs",
		min:         "8",
		gang:        ackGang("team-a", "job", "4", 4, "2"),
		wantCode:    fwk.Success,
		wantVictims: []string{"b-5", "b-6", "b-7", "b-8"},
		wantHeld:    "8",
	}, {
		name:     "the whole gang past the leaf's min: no victims, though one pod alone would reclaim",
		min:      "4",
		gang:     ackGang("team-a", "job", "4", 4, "2"),
		wantCode: fwk.Unschedulable,
		wantHeld: "0",
	}, {
		name:        "a pod of no gang, for comparison: one victim",
		min:         "4",
		gang:        []*corev1.Pod{testPod("alone", "team-a", "2", "", low, 0)},
		wantCode:    fwk.Success,
		wantVictims: []string{"b-8"},
		wantHeld:    "2",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*corev1.Node{node("n1", "16")}
			h := newHarness(t, world{tree: strings.Replace(lentTree, "MIN", tt.min, 1), nodes: nodes,
				pods: append(append([]*corev1.Pod{}, borrowers...), tt.gang...)})
			pod := tt.gang[0]
			state, status := h.preFilter(pod)
			if status.IsSuccess() {
				t.Fatal("PreFilter admitted the gang into a full root")
			}
			_, status = h.plugin.PostFilter(h.ctx, state, pod, h.unschedulableEverywhere(nodes))
			if status.Code() != tt.wantCode {
				t.Errorf("PostFilter = %v, want %v", status, tt.wantCode)
			}
			if diff := cmp.Diff(tt.wantVictims, h.victims()); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if got := h.usedCPU("team-a"); got != tt.wantHeld {
				t.Errorf("team-a used %s after PostFilter, want %s held", got, tt.wantHeld)
			}
		})
	}
}

// TestGangNeverFits: a gang larger than a max on its path is refused as
// impossible, reported once, and reclaims nothing.
func TestGangNeverFits(t *testing.T) {
	pods := ackGang("team-a", "job", "5", 5, "2") // 10 cpu in a leaf of max 8
	nodes := []*corev1.Node{node("n1", "32")}
	h := gangHarness(t, gangTree, pods...)
	for round := 0; round < 2; round++ {
		state, status := h.preFilter(pods[0])
		if !strings.Contains(status.Message(), "can never fit") || !strings.Contains(status.Message(), "max 8") {
			t.Errorf("round %d: PreFilter = %v, want an impossible gang with its figures", round, status)
		}
		if _, status := h.plugin.PostFilter(h.ctx, state, pods[0], h.unschedulableEverywhere(nodes)); status.Code() != fwk.UnschedulableAndUnresolvable {
			t.Errorf("round %d: PostFilter = %v, want UnschedulableAndUnresolvable, no reclaim", round, status)
		}
	}
	var reported []string
	for _, e := range h.events() {
		if strings.Contains(e, eventReasonGangNeverFits) {
			reported = append(reported, e)
		}
	}
	if len(reported) != 1 {
		t.Errorf("reported %q, want the gang once", reported)
	}
	if len(h.victims()) != 0 {
		t.Errorf("victims %v for a gang that can never fit", h.victims())
	}
}

// TestGangReclaimHoldServesTheGang: the room a reclaim holds for one member
// of a gang is the gang's: another member is admitted into it, without a
// second reclaim, and the gang's reservation takes it over.
func TestGangReclaimHoldServesTheGang(t *testing.T) {
	var borrowers []*corev1.Pod
	for i := 1; i <= 8; i++ {
		borrowers = append(borrowers, testPod(fmt.Sprintf("b-%d", i), "team-b", "2", "n1", low, time.Duration(10-i)*time.Hour))
	}
	job := ackGang("team-a", "job", "4", 4, "2")
	nodes := []*corev1.Node{node("n1", "16")}
	h := newHarness(t, world{tree: borrowerTree, nodes: nodes, pods: append(append([]*corev1.Pod{}, borrowers...), job...)})
	state, _ := h.preFilter(job[0])
	if _, status := h.plugin.PostFilter(h.ctx, state, job[0], h.unschedulableEverywhere(nodes)); !status.IsSuccess() {
		t.Fatalf("PostFilter: %v", status)
	}
	for _, v := range borrowers[4:] {
		h.plugin.cache.deletePod(v)
	}
	if got := h.usedCPU("team-a"); got != "8" {
		t.Fatalf("team-a used %s with the reclaim's hold, want 8", got)
	}
	// Another member, not the preemptor, is placed first.
	if _, status := h.reserve(job[1]); !status.IsSuccess() {
		t.Fatalf("a member other than the preemptor: %v, want admitted into the gang's hold", status)
	}
	if got, holds := h.usedCPU("team-a"), h.chargedHolds(); got != "8" || holds != 0 {
		t.Errorf("after the member's Reserve: team-a used %s with %d holds charged, want 8 held by the reservation alone", got, holds)
	}
	for _, p := range []*corev1.Pod{job[0], job[2], job[3]} {
		if _, status := h.reserve(p); !status.IsSuccess() {
			t.Errorf("reserving %s: %v", p.Name, status)
		}
	}
	if got := h.usedCPU("team-a"); got != "8" {
		t.Errorf("the whole gang reserved: team-a used %s, want 8", got)
	}
}
