package elastic

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// trackedTree is generation g of kube-system/eqt (UID uid) whose leaf a has
// max cpu maxA; maxA "" makes the generation invalid (two leaves list one
// namespace).
func trackedTree(uid types.UID, g int64, maxA string) *schedulingv1beta1.ElasticQuotaTree {
	root := spec{Name: "root", Min: cpu("8"), Max: cpu("8")}
	if maxA == "" {
		root.Children = []spec{{Name: "a", Namespaces: []string{"a"}}, {Name: "b", Namespaces: []string{"a"}}}
	} else {
		root.Children = []spec{{Name: "a", Namespaces: []string{"a"}, Max: cpu(maxA)}}
	}
	t := treeOf(root)
	t.UID, t.Generation, t.CreationTimestamp = uid, g, metav1.NewTime(time.Unix(1e9, 0))
	return t
}

// seen is what an observation says, in comparable form.
type seen struct {
	Chosen     string
	Generation int64
	Current    bool
	MaxA       string
	Changed    bool
	Invalid    []string // objects whose spec is invalid; "new:" when newly so
	Err        bool     // the chosen object's own spec is not in force
}

func describe(obs Observation) seen {
	s := seen{Generation: obs.InForce.Generation, Current: obs.InForce.Current, Changed: obs.Changed, Err: obs.Err != nil}
	if obs.Chosen != nil {
		s.Chosen = fmt.Sprintf("%s/%s@%d", obs.Chosen.Namespace, obs.Chosen.Name, obs.Chosen.Generation)
	}
	if obs.InForce.Tree != nil {
		a, _ := obs.InForce.Tree.Node("a")
		q := a.Max()[corev1.ResourceCPU]
		s.MaxA = q.String()
	}
	for _, v := range obs.Trees {
		switch {
		case v.NewlyInvalid:
			s.Invalid = append(s.Invalid, fmt.Sprintf("new:%s@%d", v.Object.Name, v.Object.Generation))
		case v.Err != nil:
			s.Invalid = append(s.Invalid, fmt.Sprintf("%s@%d", v.Object.Name, v.Object.Generation))
		}
	}
	return s
}

func TestTracker(t *testing.T) {
	withLastValid := func(obj *schedulingv1beta1.ElasticQuotaTree, g int64, maxA string) *schedulingv1beta1.ElasticQuotaTree {
		obj.Status.LastValid = &schedulingv1beta1.TreeGeneration{Generation: g, Spec: trackedTree("", g, maxA).Spec}
		return obj
	}
	older := trackedTree("uid-2", 1, "6")
	older.Name, older.CreationTimestamp = "older", metav1.NewTime(time.Unix(1e9, 0).Add(-time.Hour))
	elsewhere := trackedTree("uid-3", 1, "")
	elsewhere.Namespace = "team"
	steps := []struct {
		name  string
		trees []*schedulingv1beta1.ElasticQuotaTree
		want  seen
	}{
		{"nothing", nil, seen{}},
		{"a valid tree is put in force", trees(trackedTree("uid-1", 1, "2")),
			seen{Chosen: "kube-system/eqt@1", Generation: 1, Current: true, MaxA: "2", Changed: true}},
		{"a status write changes nothing", trees(withLastValid(trackedTree("uid-1", 1, "2"), 1, "2")),
			seen{Chosen: "kube-system/eqt@1", Generation: 1, Current: true, MaxA: "2"}},
		{"an invalid update leaves the last valid generation in force", trees(trackedTree("uid-1", 2, "")),
			seen{Chosen: "kube-system/eqt@2", Generation: 1, MaxA: "2", Invalid: []string{"new:eqt@2"}, Err: true}},
		{"the invalid generation is reported once", trees(trackedTree("uid-1", 2, "")),
			seen{Chosen: "kube-system/eqt@2", Generation: 1, MaxA: "2", Invalid: []string{"eqt@2"}, Err: true}},
		{"memory wins over an older status.lastValid", trees(withLastValid(trackedTree("uid-1", 3, ""), 0, "9")),
			seen{Chosen: "kube-system/eqt@3", Generation: 1, MaxA: "2", Invalid: []string{"new:eqt@3"}, Err: true}},
		{"a valid generation replaces it", trees(trackedTree("uid-1", 4, "3"), elsewhere),
			seen{Chosen: "kube-system/eqt@4", Generation: 4, Current: true, MaxA: "3", Changed: true, Invalid: []string{"new:eqt@1"}}},
		{"an older tree in kube-system takes over", trees(trackedTree("uid-1", 4, "3"), older),
			seen{Chosen: "kube-system/older@1", Generation: 1, Current: true, MaxA: "6", Changed: true}},
		{"deleting it puts the other back", trees(trackedTree("uid-1", 4, "3")),
			seen{Chosen: "kube-system/eqt@4", Generation: 4, Current: true, MaxA: "3", Changed: true}},
		{"an invalid update keeps it", trees(withLastValid(trackedTree("uid-1", 5, ""), 4, "3")),
			seen{Chosen: "kube-system/eqt@5", Generation: 4, MaxA: "3", Invalid: []string{"new:eqt@5"}, Err: true}},
		{"no tree at all", nil, seen{Changed: true}},
		{"invalid and never valid: nothing in force", trees(trackedTree("uid-4", 1, "")),
			seen{Chosen: "kube-system/eqt@1", Invalid: []string{"new:eqt@1"}, Err: true}},
	}
	tracker := &Tracker{}
	for _, step := range steps {
		if diff := cmp.Diff(step.want, describe(tracker.Observe(step.trees))); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", step.name, diff)
		}
	}
}

// TestTrackerRestart: a tracker that starts while the spec is invalid enforces
// what status.lastValid records, as one that saw the valid generation does.
func TestTrackerRestart(t *testing.T) {
	invalid := trackedTree("uid-1", 2, "")
	invalid.Status.LastValid = &schedulingv1beta1.TreeGeneration{Generation: 1, Spec: trackedTree("uid-1", 1, "2").Spec}
	remembering := &Tracker{}
	remembering.Observe(trees(trackedTree("uid-1", 1, "2")))
	for name, tracker := range map[string]*Tracker{"remembering": remembering, "restarted": {}} {
		got := describe(tracker.Observe(trees(invalid)))
		want := seen{Chosen: "kube-system/eqt@2", Generation: 1, MaxA: "2", Changed: name == "restarted", Invalid: []string{"new:eqt@2"}, Err: true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestTrackerKeepsTheBuiltTree: while the same generation is in force the
// tracker hands out the tree it built, not a new one per observation.
func TestTrackerKeepsTheBuiltTree(t *testing.T) {
	tracker := &Tracker{}
	first := tracker.Observe(trees(trackedTree("uid-1", 1, "2"))).InForce.Tree
	for _, obj := range []*schedulingv1beta1.ElasticQuotaTree{trackedTree("uid-1", 1, "2"), trackedTree("uid-1", 2, "")} {
		if got := tracker.Observe(trees(obj)).InForce.Tree; got != first {
			t.Errorf("generation %d observed: another tree model than the one in force", obj.Generation)
		}
	}
}

// TestTrackerMemoryIsBounded: a tree that goes through many invalid
// generations, and many trees created and deleted, leave the tracker
// remembering one verdict per object that exists.
func TestTrackerMemoryIsBounded(t *testing.T) {
	tracker := &Tracker{}
	tracker.Observe(trees(trackedTree("uid-1", 1, "2")))
	newlyInvalid := 0
	for g := int64(2); g <= 500; g++ {
		churn := trackedTree(types.UID(fmt.Sprintf("churn-%d", g)), 1, "")
		churn.Name = fmt.Sprintf("churn-%d", g)
		for range 2 {
			for _, v := range tracker.Observe(trees(trackedTree("uid-1", g, ""), churn)).Trees {
				if v.NewlyInvalid && v.Object.UID == "uid-1" {
					newlyInvalid++
				}
			}
		}
	}
	if newlyInvalid != 499 {
		t.Errorf("%d invalid generations reported, want each of 499 once", newlyInvalid)
	}
	if got := len(tracker.verdicts); got != 2 {
		t.Errorf("the tracker remembers %d verdicts with 2 objects left", got)
	}
	tracker.Observe(nil)
	if got := len(tracker.verdicts); got != 0 {
		t.Errorf("the tracker remembers %d verdicts with no object left", got)
	}
}

func TestUnchargedSharesTheShapeNotTheUsage(t *testing.T) {
	tree := mustBuild(t, trackedTree("uid-1", 1, "2"))
	tree.AddPod(pod("p", "a", cpu("1")))
	copy := tree.Uncharged()
	used, _ := copy.Used("a")
	if !used.Cpu().IsZero() || copy.PodCount() != 0 || copy.Object() != tree.Object() {
		t.Errorf("Uncharged: used %v, %d pods, object %q", used, copy.PodCount(), copy.Object())
	}
	copy.AddPod(pod("q", "a", cpu("1")))
	if used, _ := tree.Used("a"); used.Cpu().String() != "1" {
		t.Errorf("charging the copy changed the original: used %v", used)
	}
}

func TestCharged(t *testing.T) {
	now := metav1.Now()
	bound := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := pod("p", "a", cpu("1"))
		p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
		mutate(p)
		return p
	}
	condition := func(status corev1.ConditionStatus) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: status}}
		}
	}
	tests := []struct {
		name             string
		pod              *corev1.Pod
		charged, leaving bool
	}{
		{"pending", pod("p", "a", cpu("1")), false, false},
		{"running", bound(func(*corev1.Pod) {}), true, false},
		{"bound, not started", bound(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), true, false},
		{"succeeded", bound(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false, false},
		{"failed", bound(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false, false},
		{"being deleted", bound(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), true, true},
		{"marked for disruption", bound(condition(corev1.ConditionTrue)), true, true},
		{"disruption withdrawn", bound(condition(corev1.ConditionFalse)), true, false},
	}
	for _, tt := range tests {
		if got := Charged(tt.pod); got != tt.charged {
			t.Errorf("%s: Charged = %v, want %v", tt.name, got, tt.charged)
		}
		if got := Leaving(tt.pod); got != tt.leaving {
			t.Errorf("%s: Leaving = %v, want %v", tt.name, got, tt.leaving)
		}
	}
	if Charged(nil) {
		t.Error("Charged(nil)")
	}
}
