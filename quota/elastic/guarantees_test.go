package elastic

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestKeepsGuarantees(t *testing.T) {
	// Seed 000's tree: root 40 cpu; root.a and root.b min 20; four leaves min
	// 10, max 20, over namespace1..4.
	tree := mustBuild(t, seedTree(t))
	charge := func(uid, namespace, amount string) {
		tree.AddPod(pod(uid, namespace, cpu(amount)))
	}
	charge("a1-x", "namespace1", "5")
	charge("a2-x", "namespace2", "5")
	charge("a2-y", "namespace2", "5")
	charge("a2-z", "namespace2", "5") // root.a.2 at 15, 5 above its min
	charge("b1-x", "namespace3", "5")
	charge("b1-y", "namespace3", "5")
	charge("b1-z", "namespace3", "5") // root.b.1 at 15 above its min, but root.b at 15, below its 20
	charge("outside", "elsewhere", "5")

	tests := []struct {
		name    string
		victims []string
		want    bool
	}{
		{"own leaf: priority preemption as usual", []string{"a1-x"}, true},
		{"a sibling leaf keeps its min", []string{"a2-x"}, true},
		{"a sibling leaf taken below its min", []string{"a2-x", "a2-y"}, false},
		{"a cousin leaf above min whose parent is below min", []string{"b1-x"}, false},
		{"pods outside the tree", []string{"outside"}, true},
		{"pods the tree does not track", []string{"gone"}, true},
		{"none", nil, true},
	}
	for _, tt := range tests {
		uids := make([]types.UID, 0, len(tt.victims))
		for _, v := range tt.victims {
			uids = append(uids, types.UID(v))
		}
		if got := tree.KeepsGuarantees("namespace1", uids); got != tt.want {
			t.Errorf("%s: KeepsGuarantees(%v) = %v, want %v", tt.name, tt.victims, got, tt.want)
		}
	}
	for victims, want := range map[string]bool{"a1-x": true, "outside": true, "gone": true, "a2-x": false, "b1-x": false} {
		if got := tree.ChargedWithin("namespace1", []types.UID{types.UID(victims)}); got != want {
			t.Errorf("ChargedWithin(%s) = %v, want %v", victims, got, want)
		}
	}
	// A preemptor outside the tree shares no quota node with anyone, so even
	// a pod of its "own" leaf is constrained.
	if tree.KeepsGuarantees("elsewhere", []types.UID{"a1-x"}) {
		t.Errorf("an ungoverned preemptor took root.a.1 (5 cpu, min 10) lower")
	}
}

func TestKeepsGuaranteesCountsLeavingPodsAsGone(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	for _, uid := range []string{"a2-x", "a2-y", "a2-z"} {
		tree.AddPod(pod(uid, "namespace2", cpu("5"))) // root.a.2 at 15, min 10
	}
	if !tree.KeepsGuarantees("namespace1", []types.UID{"a2-x"}) {
		t.Fatalf("evicting one pod of root.a.2 (15 -> 10, min 10) was refused")
	}
	// An earlier preemption evicted a2-x; it is still being deleted.
	evicted := pod("a2-x", "namespace2", cpu("5"))
	evicted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tree.AddPod(evicted)
	if used, _ := tree.Used("root.a.2"); !used.Cpu().Equal(resource.MustParse("15")) {
		t.Errorf("a leaving pod is no longer charged: root.a.2 uses %s, want 15 until it is gone", used.Cpu())
	}
	if tree.KeepsGuarantees("namespace1", []types.UID{"a2-y"}) {
		t.Errorf("a second eviction counted the leaving pod as room above root.a.2's min")
	}
	if !tree.KeepsGuarantees("namespace1", []types.UID{"a2-x"}) {
		t.Errorf("the leaving pod itself was refused as a victim: its eviction is under way")
	}
	// A rebuild carries the mark; so does a re-add without one.
	rebuilt, err := tree.Rebuild(seedTree(t))
	if err != nil {
		t.Fatal(err)
	}
	rebuilt.AddRequests("a2-x", "namespace2", cpu("5"))
	if rebuilt.KeepsGuarantees("namespace1", []types.UID{"a2-y"}) {
		t.Errorf("the rebuilt tree forgot that a2-x is leaving")
	}
	// Gone, it leaves nothing behind: with a new pod root.a.2 is at 15 again
	// and may give 5.
	rebuilt.RemovePod("a2-x")
	rebuilt.AddPod(pod("a2-w", "namespace2", cpu("5")))
	if !rebuilt.KeepsGuarantees("namespace1", []types.UID{"a2-y"}) {
		t.Errorf("the leaving pod's charge outlived it: evicting a2-y from root.a.2 at 15 was refused")
	}
}

// TestLeavingBeforeTheDeletionShows: a pod is on its way out as soon as a
// preemption chose it (MarkLeaving) or its evictor set DisruptionTarget, well
// before the API shows its deletion timestamp.
func TestLeavingBeforeTheDeletionShows(t *testing.T) {
	disrupted := func(status corev1.ConditionStatus) func(*Tree) {
		return func(tree *Tree) {
			p := pod("a2-x", "namespace2", cpu("5"))
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: status, Reason: corev1.PodReasonPreemptionByScheduler}}
			tree.AddPod(p)
		}
	}
	for _, tc := range []struct {
		name        string
		mark        func(*Tree)
		wantLeaving bool
	}{
		{name: "chosen as a victim", mark: func(tree *Tree) { tree.MarkLeaving("a2-x") }, wantLeaving: true},
		{name: "chosen, then seen again before its deletion", mark: func(tree *Tree) {
			tree.MarkLeaving("a2-x")
			tree.AddPod(pod("a2-x", "namespace2", cpu("5")))
		}, wantLeaving: true},
		{name: "a true DisruptionTarget condition", mark: disrupted(corev1.ConditionTrue), wantLeaving: true},
		{name: "a DisruptionTarget condition reset to false", mark: disrupted(corev1.ConditionFalse)},
		{name: "an untracked pod chosen", mark: func(tree *Tree) {
			if tree.MarkLeaving("elsewhere") {
				t.Errorf("MarkLeaving reported an untracked pod tracked")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := mustBuild(t, seedTree(t))
			for _, uid := range []string{"a2-x", "a2-y", "a2-z"} {
				tree.AddPod(pod(uid, "namespace2", cpu("5"))) // root.a.2 at 15, min 10
			}
			tc.mark(tree)
			if used, _ := tree.Used("root.a.2"); !used.Cpu().Equal(resource.MustParse("15")) {
				t.Errorf("root.a.2 uses %s, want 15: a pod holds its quota until it is gone", used.Cpu())
			}
			if leaving := !tree.KeepsGuarantees("namespace1", []types.UID{"a2-y"}); leaving != tc.wantLeaving {
				t.Errorf("a2-x counted as leaving by a second eviction: %t, want %t", leaving, tc.wantLeaving)
			}
		})
	}
}
