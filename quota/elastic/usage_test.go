package elastic

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func usedCPU(t *testing.T, tree *Tree, node string) string {
	t.Helper()
	used, ok := tree.Used(node)
	if !ok {
		t.Fatalf("no node %q", node)
	}
	q := used[corev1.ResourceCPU]
	return q.String()
}

func TestAddAndRemovePods(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	p := pod("p1", "namespace1", cpu("5"))
	if !tree.AddPod(p) {
		t.Fatal("AddPod: not counted")
	}
	if !tree.AddPod(p) {
		t.Fatal("second AddPod: not counted")
	}
	for node, want := range map[string]string{"root.a.1": "5", "root.a": "5", "root": "5", "root.b": "0", "root.a.2": "0"} {
		if got := usedCPU(t, tree, node); got != want {
			t.Errorf("after idempotent adds, used cpu of %s = %s, want %s", node, got, want)
		}
	}

	resized := pod("p1", "namespace1", cpu("7"))
	tree.AddPod(resized)
	if got := usedCPU(t, tree, "root"); got != "7" {
		t.Errorf("after resize, root cpu = %s, want 7", got)
	}

	moved := pod("p1", "namespace3", cpu("7"))
	tree.AddPod(moved)
	if a, b := usedCPU(t, tree, "root.a"), usedCPU(t, tree, "root.b"); a != "0" || b != "7" {
		t.Errorf("after namespace change, root.a=%s root.b=%s, want 0 and 7", a, b)
	}

	if tree.AddPod(pod("ignored", "default", cpu("100"))) {
		t.Error("pod of an ungoverned namespace counted")
	}
	if got := usedCPU(t, tree, "root"); got != "7" {
		t.Errorf("ungoverned pod changed root to %s", got)
	}
	if tree.PodCount() != 2 {
		t.Errorf("PodCount = %d, want 2 (the ungoverned pod is tracked for Rebuild)", tree.PodCount())
	}

	done := pod("p1", "namespace3", cpu("7"))
	done.Status.Phase = corev1.PodSucceeded
	if tree.AddPod(done) {
		t.Error("a succeeded pod is counted")
	}
	if got := usedCPU(t, tree, "root"); got != "0" {
		t.Errorf("succeeded pod still charged: root cpu %s", got)
	}
	if tree.RemovePod("p1") {
		t.Error("RemovePod of a released pod reported tracked")
	}
	if !tree.RemovePod("ignored") || tree.PodCount() != 0 {
		t.Errorf("RemovePod(ignored) / PodCount = %d", tree.PodCount())
	}
}

func TestUngovernedPodBecomesGoverned(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	tree.AddRequests("p", "default", cpu("3"))
	if !tree.AddRequests("p", "namespace4", cpu("3")) {
		t.Fatal("not counted after moving into a governed namespace")
	}
	if got := usedCPU(t, tree, "root.b.2"); got != "3" {
		t.Errorf("root.b.2 cpu = %s, want 3", got)
	}
	if tree.AddRequests("p", "other", cpu("3")) {
		t.Error("counted after moving out")
	}
	if tree.AddRequests("p", "other2", cpu("4")) {
		t.Error("counted while staying out")
	}
	if got := usedCPU(t, tree, "root"); got != "0" {
		t.Errorf("root cpu = %s, want 0", got)
	}
}

func TestAddRemoveCycleDoesNotAllocate(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	requests := list("cpu", "1", "memory", "1Gi")
	uids := make([]types.UID, 64)
	for i := range uids {
		uids[i] = types.UID(fmt.Sprintf("uid-%d", i))
	}
	// Warm the store so slots and map buckets exist.
	for _, uid := range uids {
		tree.AddRequests(uid, "namespace1", requests)
	}
	for _, uid := range uids {
		tree.RemovePod(uid)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, uid := range uids {
			tree.AddRequests(uid, "namespace1", requests)
		}
		for _, uid := range uids {
			tree.AddRequests(uid, "namespace1", requests) // idempotent re-add
		}
		for _, uid := range uids {
			tree.RemovePod(uid)
		}
	})
	if allocs != 0 {
		t.Errorf("add/re-add/remove cycle allocates %v times, want 0", allocs)
	}
}

func TestRebuild(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	tree.AddPod(pod("a", "namespace1", cpu("5")))
	tree.AddPod(pod("b", "namespace3", list("cpu", "2", "ephemeral-storage", "1Gi")))
	tree.AddPod(pod("c", "namespace9", cpu("3")))

	// The new spec moves namespace3 under root.a, adds namespace9 and starts
	// limiting ephemeral-storage.
	next := seedTree(t)
	root := &next.Spec.Root
	root.Children[0].Children[1].Namespaces = []string{"namespace2", "namespace3"}
	root.Children[1].Children[0].Namespaces = []string{"namespace9"}
	root.Children[1].Children[1].Max["ephemeral-storage"] = list("x", "10Gi")["x"]
	rebuilt, err := tree.Rebuild(next)
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"root.a.1": "5", "root.a.2": "2", "root.b.1": "3", "root": "10"} {
		if got := usedCPU(t, rebuilt, node); got != want {
			t.Errorf("rebuilt used cpu of %s = %s, want %s", node, got, want)
		}
	}
	used, _ := rebuilt.Used("root.a.2")
	if q := used["ephemeral-storage"]; q.String() != "1Gi" {
		t.Errorf("ephemeral-storage of the moved pod = %s, want 1Gi (requests are kept whole)", q.String())
	}
	if got := usedCPU(t, tree, "root.b.1"); got != "2" {
		t.Errorf("old tree changed: root.b.1 cpu %s", got)
	}

	broken := seedTree(t)
	broken.Spec.Root.Max = cpu("1")
	if got, err := tree.Rebuild(broken); err == nil || got != nil {
		t.Errorf("Rebuild of an invalid spec = %v, %v", got, err)
	}
	if got := usedCPU(t, tree, "root"); got != "7" {
		t.Errorf("old tree changed by a failed rebuild: root cpu %s", got)
	}
}

func TestScratchAdmitsPendingPodsOneByOne(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	for i := range 2 {
		tree.AddRequests(types.UID(fmt.Sprint("run", i)), "namespace1", cpu("5"))
	}
	scratch := tree.Scratch()
	var admitted []int
	var reasons []string
	for i := range 10 {
		v := scratch.Add("namespace1", cpu("5"))
		if v.Admitted() {
			admitted = append(admitted, i)
		} else {
			reasons = append(reasons, v.Reason())
		}
	}
	if diff := cmp.Diff([]int{0, 1}, admitted); diff != "" {
		t.Errorf("admitted pending pods (-want +got):\n%s", diff)
	}
	if len(reasons) != 8 || reasons[0] != `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu` {
		t.Errorf("reasons = %q", reasons)
	}
	if got := usedCPU(t, tree, "root.a.1"); got != "10" {
		t.Errorf("scratch leaked into the tree: root.a.1 cpu %s", got)
	}
	if !scratch.Release("namespace1", cpu("5")) || !scratch.Add("namespace1", cpu("5")).Admitted() {
		t.Error("room freed by Release not admitted")
	}
	if scratch.Release("default", cpu("5")) {
		t.Error("Release of an ungoverned namespace reported governed")
	}
	if v := scratch.Add("default", cpu("500")); !v.Admitted() || v.Governed() {
		t.Error("ungoverned namespace refused")
	}
}

func TestTracks(t *testing.T) {
	tree := mustBuild(t, flatTree("cpu", "8", [3]string{"team-a", "4", "8"}))
	pod := pod("pod-1", "team-a", list("cpu", "1"))
	if tree.Tracks(pod.UID) {
		t.Fatal("tracks a pod never added")
	}
	tree.AddPod(pod)
	if !tree.Tracks(pod.UID) {
		t.Fatal("does not track an added pod")
	}
	tree.RemovePod(pod.UID)
	if tree.Tracks(pod.UID) {
		t.Fatal("tracks a removed pod")
	}
}
