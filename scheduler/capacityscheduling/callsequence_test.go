package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/quota/gang"
)

// These tests drive the plugin through the call sequences of kube-scheduler
// 1.37 (kubescheduler_test.go): copies of the pod at Reserve and Permit, and
// the pod group cycle's Reserve, Unreserve, Reserve.

// usedOf is a quota node's usage of one resource.
func (h *harness) usedOf(node string, name corev1.ResourceName) int64 {
	h.plugin.cache.mu.Lock()
	defer h.plugin.cache.mu.Unlock()
	used, _ := h.plugin.cache.tree.Used(node)
	q := used[name]
	return q.Value()
}

// chargedHolds counts the reclaim holds charged to the tree.
func (h *harness) chargedHolds() int {
	h.plugin.cache.mu.Lock()
	defer h.plugin.cache.mu.Unlock()
	n := 0
	for _, hd := range h.plugin.cache.holds {
		if hd.charged {
			n++
		}
	}
	return n
}

// TestSharedClaimReservedFromACopy: two pods share one claim of 2 devices in
// a leaf of 2. The first is reserved as kube-scheduler reserves it, from a
// copy: the claim is charged under its own key, so the second pod, which
// names it too, asks nothing more for it and is admitted; a third pod with
// its own claim is refused by the leaf.
func TestSharedClaimReservedFromACopy(t *testing.T) {
	first := withClaim(testPod("first", "team-a", "1", "", high, 2*time.Minute), "shared")
	second := withClaim(testPod("second", "team-a", "1", "", high, time.Minute), "shared")
	third := withClaim(testPod("third", "team-a", "1", "", high, 0), "own")
	h := newHarness(t, world{tree: gpuTree, nodes: []*corev1.Node{node("n1", "64")}, pods: []*corev1.Pod{first, second, third},
		dra: []runtime.Object{gpuClass(), gpuClaim("team-a", "shared", "gpu.example.com", 2), gpuClaim("team-a", "own", "gpu.example.com", 1)}})

	if _, status := h.reserve(first); !status.IsSuccess() {
		t.Fatalf("the first user of the shared claim: %v", status)
	}
	if got := h.usedOf("team-a", gpuDevices); got != 2 {
		t.Errorf("after the first user's Reserve, team-a uses %d devices, want the claim's 2", got)
	}
	if _, status := h.reserve(second); !status.IsSuccess() {
		t.Errorf("the second user of the shared claim: %v, want admitted: the claim is charged once", status)
	}
	if got := h.usedOf("team-a", gpuDevices); got != 2 {
		t.Errorf("after both users' Reserve, team-a uses %d devices, want 2", got)
	}
	code, msg := h.preFilterCode(third)
	if code != fwk.UnschedulableAndUnresolvable || !strings.Contains(msg, `"team-a"`) {
		t.Errorf("a pod with its own claim: PreFilter = %v %q, want refused by team-a", code, msg)
	}
}

// reclaimWorld: team-b borrows 16 cpu of a root of 16 on n1; team-a (min 8)
// has a Workload API gang of 4 pods of 2 cpu; n2 is empty, so only quota
// stands in the gang's way. A gang of team-b, other, is refused by the full
// root.
func reclaimWorld(t *testing.T) (*harness, *schedulingapi.PodGroup, []*corev1.Pod, []*corev1.Pod, []*corev1.Pod) {
	t.Helper()
	var borrowers []*corev1.Pod
	for i := 1; i <= 8; i++ {
		borrowers = append(borrowers, testPod(fmt.Sprintf("b-%d", i), "team-b", "2", "n1", low, time.Duration(10-i)*time.Hour))
	}
	pg, job := workloadGang("team-a", "train", 4, 4, "2")
	other := ackGang("team-b", "other", "2", 2, "2")
	pods := append(append(append([]*corev1.Pod{}, borrowers...), job...), other...)
	h := newHarness(t, world{tree: borrowerTree, nodes: []*corev1.Node{node("n1", "16"), node("n2", "16")}, pods: pods,
		podGroups: []*schedulingapi.PodGroup{pg}})
	return h, pg, job, borrowers, other
}

// onNode places every pod on node.
func onNode(node string, pods []*corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[p.Name] = node
	}
	return out
}

// TestPodGroupCycleKeepsReclaimHolds follows a Workload API gang its quota
// refused through kube-scheduler's pod group cycles: PodGroupPostFilter's
// trial placement charges nothing and leaves the gang refused; the reclaim's
// hold survives a cycle that failed on node fit after reserving members; and
// a successful cycle's revert requeues no other gang.
func TestPodGroupCycleKeepsReclaimHolds(t *testing.T) {
	h, pg, job, borrowers, other := reclaimWorld(t)
	key := gang.Key{Kind: gang.KindPodGroup, Namespace: "team-a", Name: "train"}
	if _, status := h.preFilter(other[0]); status.IsSuccess() {
		t.Fatal("team-b's gang admitted into a full root")
	}

	// The first cycle: quota refuses the gang; PodGroupPostFilter reclaims,
	// after a trial placement on n2 with the victims gone.
	pgState := framework.NewCycleState()
	if first := h.firstPass(pgState, job, onNode("n2", job)); first[0].status.IsSuccess() {
		t.Fatal("the gang admitted into a full root")
	}
	result, status := h.plugin.PodGroupPostFilter(h.ctx, pgState, podGroupInfo(pg, job), h.podGroupSchedulingFunc(job, onNode("n2", job), 4))
	if !status.IsSuccess() || result == nil {
		t.Fatalf("PodGroupPostFilter = %v, want a reclaim", status)
	}
	if got := h.victims(); len(got) != 4 {
		t.Fatalf("victims %v, want 4 of team-b's pods", got)
	}
	h.plugin.cache.mu.Lock()
	_, stillRefused := h.plugin.cache.gangRefusals[key]
	reservations := len(h.plugin.cache.reservations)
	h.plugin.cache.mu.Unlock()
	if !stillRefused || reservations != 0 {
		t.Errorf("after the trial: gang refused %v, %d reservations; want still refused, none", stillRefused, reservations)
	}
	if got := h.activatedPods(); len(got) != 0 {
		t.Errorf("the trial activated %v, want nobody", got)
	}
	for _, v := range borrowers[4:] {
		h.plugin.cache.deletePod(v)
	}
	if got, holds := h.usedCPU("team-a"), h.chargedHolds(); got != "8" || holds != 1 {
		t.Fatalf("the reclaim's hold: team-a used %s with %d holds, want 8 held by one", got, holds)
	}

	// A cycle that reserves two members and fails on node fit for the rest.
	nodes := onNode("n2", job[:2])
	h.podGroupCycle(job, nodes, 4)
	if got, holds := h.usedCPU("team-a"), h.chargedHolds(); got != "8" || holds != 1 {
		t.Errorf("after a cycle that failed on node fit: team-a used %s with %d holds charged, want the hold's 8", got, holds)
	}
	if _, status := h.preFilter(testPod("late", "team-b", "2", "", high, 0)); status.IsSuccess() {
		t.Error("a pod of team-b admitted into the room the reclaim holds for the gang")
	}

	// A cycle that places the gang: reserved, reverted, reserved again.
	for _, pl := range h.podGroupCycle(job, onNode("n2", job), 4) {
		if !pl.status.IsSuccess() {
			t.Errorf("%s: %v, want reserved for binding", pl.pod.Name, pl.status)
		}
	}
	if got, holds := h.usedCPU("team-a"), h.chargedHolds(); got != "8" || holds != 0 {
		t.Errorf("the gang reserved: team-a used %s with %d holds charged, want 8 held by the reservation alone", got, holds)
	}
	if got := h.activatedPods(); len(got) != 0 {
		t.Errorf("the cycle's revert activated %v, want nobody: the gang is reserved again at once", got)
	}
}

// TestMemberSpendsAnotherMembersHold: a reclaim made room for one member of
// a reserved gang; another member admitted into that room takes it over, so
// the room is charged once and no quota node goes past its max.
func TestMemberSpendsAnotherMembersHold(t *testing.T) {
	var borrowers []*corev1.Pod
	for i := 1; i <= 5; i++ {
		borrowers = append(borrowers, testPod(fmt.Sprintf("b-%d", i), "team-b", "2", "n1", low, time.Duration(10-i)*time.Hour))
	}
	// A gang of min-available 2 whose later members are larger.
	job := ackGang("team-a", "job", "2", 4, "2")
	for i, cpu := range []string{"2", "4", "6", "6"} {
		job[i].Spec.Containers[0].Resources.Requests = cpuList(cpu)
	}
	nodes := []*corev1.Node{node("n1", "16"), node("n2", "32")}
	h := newHarness(t, world{tree: strings.Replace(lentTree, "MIN", "12", 1), nodes: nodes, pods: append(append([]*corev1.Pod{}, borrowers...), job...)})

	// job-1 opens the reservation for the first two members: 2 + 4.
	if _, status := h.reserve(job[0]); !status.IsSuccess() {
		t.Fatalf("job-1: %v", status)
	}
	// job-3 (6 cpu) does not fit what is left of it; it reclaims.
	state, status := h.preFilter(job[2])
	if status.IsSuccess() {
		t.Fatal("job-3 admitted past the root's max")
	}
	if _, status := h.plugin.PostFilter(h.ctx, state, job[2], h.unschedulableEverywhere(nodes)); !status.IsSuccess() {
		t.Fatalf("job-3's reclaim: %v", status)
	}
	for _, v := range h.victims() {
		h.plugin.cache.deletePod(testPod(v, "team-b", "2", "n1", low, 0))
	}
	// job-4 is admitted into the room job-3's reclaim holds for the gang.
	if _, status := h.reserve(job[3]); !status.IsSuccess() {
		t.Fatalf("job-4: %v", status)
	}
	if got := h.usedOf("root", corev1.ResourceCPU); got > 16 {
		t.Errorf("root used %d cpu once job-4 took job-3's held room, want at most its max 16", got)
	}
}

// TestHoldExpiryRequeuesGangs: a gang refused only as a whole (each of its
// pods would fit alone) is moved back to the active queue when an expired
// reclaim hold frees the room it asks for.
func TestHoldExpiryRequeuesGangs(t *testing.T) {
	var running []*corev1.Pod
	for i := 1; i <= 6; i++ {
		running = append(running, testPod(fmt.Sprintf("r-%d", i), "team-b", "2", "n1", low, time.Hour))
	}
	preemptor := testPod("preemptor", "team-a", "2", "", high, 0)
	job := ackGang("team-b", "job", "2", 2, "2")
	h := newHarness(t, world{tree: borrowerTree, nodes: []*corev1.Node{node("n1", "32")},
		pods: append(append(append([]*corev1.Pod{}, running...), preemptor), job...)})
	h.plugin.cache.startHold(preemptor, "team-a", cpuList("2"), nil)
	// 12 running, 2 held: the gang's 4 does not fit the root's 16.
	if _, status := h.preFilter(job[0]); status.IsSuccess() || !strings.Contains(status.Message(), "gang team-b/job") {
		t.Fatalf("the gang: %v, want refused as a gang", status)
	}
	h.clock.Step(h.plugin.cache.holdFor + time.Second)
	h.plugin.sweepHolds(h.ctx)
	if diff := cmp.Diff([]string{"team-b/job-1", "team-b/job-2"}, h.activatedPods()); diff != "" {
		t.Errorf("activated once the hold expired (-want +got):\n%s", diff)
	}
}
