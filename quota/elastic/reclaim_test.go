package elastic

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// running is a pod already charged to the tree, described for a plan.
type running struct {
	uid       string
	namespace string
	requests  corev1.ResourceList
	priority  int32
	created   int64
	pdb       bool
}

func TestPlanReclaim(t *testing.T) {
	hierarchy := treeOf(spec{
		Name: "root", Min: cpu("20"), Max: cpu("20"),
		Children: []spec{
			{Name: "a", Min: cpu("10"), Max: cpu("20"), Children: []spec{
				{Name: "a.1", Namespaces: []string{"a1"}, Min: cpu("2"), Max: cpu("20")},
				{Name: "a.2", Namespaces: []string{"a2"}, Min: cpu("8"), Max: cpu("20")},
			}},
			{Name: "b", Namespaces: []string{"b"}, Min: cpu("5"), Max: cpu("20")},
			{Name: "c", Namespaces: []string{"c"}, Min: cpu("5"), Max: cpu("20")},
		},
	})
	siblings := treeOf(spec{
		Name: "root", Min: cpu("20"), Max: cpu("20"),
		Children: []spec{
			{Name: "a", Namespaces: []string{"a"}, Min: cpu("10"), Max: cpu("20")},
			{Name: "b", Min: cpu("10"), Max: cpu("20"), Children: []spec{
				{Name: "b.1", Namespaces: []string{"b1"}, Min: cpu("5"), Max: cpu("20")},
				{Name: "b.2", Namespaces: []string{"b2"}, Min: cpu("5"), Max: cpu("20")},
			}},
		},
	})
	flat := flatTree("cpu", "10", [3]string{"a", "5", "10"}, [3]string{"b", "5", "10"})
	tests := []struct {
		name      string
		tree      *Tree
		running   []running
		preemptor Preemptor
		want      []types.UID
		ok        bool
	}{
		{
			name: "fits already: nothing to do", tree: mustBuild(t, flat),
			running:   []running{{uid: "a-1", namespace: "a", requests: cpu("2")}},
			preemptor: Preemptor{Namespace: "b", Requests: cpu("2")}, ok: true,
		},
		{
			name: "ungoverned preemptor: quota is not in the way", tree: mustBuild(t, flat),
			preemptor: Preemptor{Namespace: "default", Requests: cpu("200")}, ok: true,
		},
		{
			name: "owner above its min cannot reclaim", tree: mustBuild(t, flat),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("4")},
				{uid: "b-1", namespace: "b", requests: cpu("6")},
			},
			preemptor: Preemptor{Namespace: "b", Requests: cpu("1")},
		},
		{
			name: "victims only from quotas above their min", tree: mustBuild(t, flat),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("5")},
				{uid: "b-1", namespace: "b", requests: cpu("5")},
			},
			preemptor: Preemptor{Namespace: "b", Requests: cpu("1")},
		},
		{
			name: "a subtree reclaims from outside only within its own min: the sibling pays",
			tree: mustBuild(t, siblings),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("5"), created: 9},
				{uid: "a-2", namespace: "a", requests: cpu("5")},
				{uid: "b2-1", namespace: "b2", requests: cpu("5")},
				{uid: "b2-2", namespace: "b2", requests: cpu("5")},
			},
			// b.1 is below its min, but b as a whole is at its min, so
			// taking from a would lift b above its guarantee; b.2 is over.
			preemptor: Preemptor{Namespace: "b1", Requests: cpu("5")},
			want:      []types.UID{"b2-1"}, ok: true,
		},
		{
			name: "a victim's ancestor never goes below its min",
			tree: mustBuild(t, hierarchy),
			running: []running{
				{uid: "a1-1", namespace: "a1", requests: cpu("2"), created: 5},
				{uid: "a1-2", namespace: "a1", requests: cpu("2"), created: 6},
				{uid: "a1-3", namespace: "a1", requests: cpu("2"), created: 7},
				{uid: "a2-1", namespace: "a2", requests: cpu("4")},
				{uid: "c-1", namespace: "c", requests: cpu("5")},
				{uid: "c-2", namespace: "c", requests: cpu("5")},
			},
			// a.1 is furthest over (6 on a min of 2) but a sits exactly on
			// its min of 10; c is over by 5.
			preemptor: Preemptor{Namespace: "b", Requests: cpu("2")},
			want:      []types.UID{"c-1"}, ok: true,
		},
		{
			name: "furthest over min first, then lower priority, then newest, then UID",
			tree: mustBuild(t, flatTree("cpu", "12", [3]string{"a", "2", "12"}, [3]string{"b", "4", "12"}, [3]string{"p", "4", "12"})),
			running: []running{
				{uid: "b-old", namespace: "b", requests: cpu("1"), created: 1},
				{uid: "b-new", namespace: "b", requests: cpu("1"), created: 2},
				{uid: "b-low", namespace: "b", requests: cpu("1"), created: 1, priority: -1},
				{uid: "b-x", namespace: "b", requests: cpu("1"), created: 3},
				{uid: "b-y", namespace: "b", requests: cpu("1"), created: 3},
				{uid: "b-z", namespace: "b", requests: cpu("1"), created: 3},
				{uid: "a-1", namespace: "a", requests: cpu("1"), created: 1},
				{uid: "a-2", namespace: "a", requests: cpu("1"), created: 1},
				{uid: "a-3", namespace: "a", requests: cpu("1"), created: 1},
				{uid: "a-4", namespace: "a", requests: cpu("1"), created: 1},
				{uid: "a-5", namespace: "a", requests: cpu("1"), created: 1},
				{uid: "a-6", namespace: "a", requests: cpu("1"), created: 1},
			},
			// a starts (6-2)/2 = 2.0 over its min, b (6-4)/4 = 0.5.
			// Re-ranked after each victim, a gives a-1, a-2, a-3 (at 2.0,
			// 1.5, 1.0); then both are at 0.5 and b-low wins on priority.
			preemptor: Preemptor{Namespace: "p", Requests: cpu("4")},
			want:      []types.UID{"a-1", "a-2", "a-3", "b-low"}, ok: true,
		},
		{
			name: "newest first among equals",
			tree: mustBuild(t, flat),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("2"), created: 1},
				{uid: "a-2", namespace: "a", requests: cpu("2"), created: 3},
				{uid: "a-3", namespace: "a", requests: cpu("2"), created: 2},
				{uid: "a-4", namespace: "a", requests: cpu("2"), created: 3},
				{uid: "a-5", namespace: "a", requests: cpu("2"), created: 3},
			},
			preemptor: Preemptor{Namespace: "b", Requests: cpu("2")},
			want:      []types.UID{"a-2"}, ok: true,
		},
		{
			name: "PDB-protected pods go last",
			tree: mustBuild(t, flatTree("cpu", "10", [3]string{"a", "0", "10"}, [3]string{"b", "2", "10"}, [3]string{"p", "5", "10"})),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("3"), pdb: true}, // infinitely over its min of 0
				{uid: "b-1", namespace: "b", requests: cpu("3"), created: 1},
				{uid: "b-2", namespace: "b", requests: cpu("2"), created: 2},
				{uid: "p-1", namespace: "p", requests: cpu("2")},
			},
			preemptor: Preemptor{Namespace: "p", Requests: cpu("1")},
			want:      []types.UID{"b-2"}, ok: true,
		},
		{
			name: "PDB-protected pods are used when nothing else helps",
			tree: mustBuild(t, flatTree("cpu", "10", [3]string{"a", "1", "10"}, [3]string{"p", "5", "10"})),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("5"), pdb: true},
				{uid: "a-2", namespace: "a", requests: cpu("5"), pdb: true},
			},
			preemptor: Preemptor{Namespace: "p", Requests: cpu("1")},
			want:      []types.UID{"a-1"}, ok: true,
		},
		{
			name: "inside the leaf only lower priority, and the plan is minimal",
			tree: mustBuild(t, flatTree("cpu", "10", [3]string{"p", "5", "5"})),
			running: []running{
				{uid: "small", namespace: "p", requests: cpu("1"), priority: 1},
				{uid: "big", namespace: "p", requests: cpu("4"), priority: 2},
			},
			// small goes first (lowest priority) but is not needed once big
			// is gone.
			preemptor: Preemptor{Namespace: "p", Requests: cpu("4"), Priority: 10},
			want:      []types.UID{"big"}, ok: true,
		},
		{
			name: "inside the leaf equal priority is not preempted",
			tree: mustBuild(t, flatTree("cpu", "10", [3]string{"p", "5", "5"})),
			running: []running{
				{uid: "peer", namespace: "p", requests: cpu("5"), priority: 10},
			},
			preemptor: Preemptor{Namespace: "p", Requests: cpu("4"), Priority: 10},
		},
		{
			name: "a victim must free a short resource",
			tree: mustBuild(t, treeOf(spec{
				Name: "root", Min: list("cpu", "10", "memory", "10Gi"), Max: list("cpu", "10", "memory", "10Gi"),
				Children: []spec{
					{Name: "a", Namespaces: []string{"a"}, Min: list("cpu", "5"), Max: list("cpu", "10", "memory", "10Gi")},
					{Name: "b", Namespaces: []string{"b"}, Min: list("cpu", "5", "memory", "5Gi"), Max: list("cpu", "10", "memory", "10Gi")},
				},
			})),
			running: []running{
				{uid: "a-mem", namespace: "a", requests: list("memory", "6Gi"), created: 9},
				{uid: "a-cpu-2", namespace: "a", requests: cpu("5")},
				{uid: "a-cpu-1", namespace: "a", requests: cpu("5")},
			},
			// Only cpu is short; a-mem is newest but frees no cpu.
			preemptor: Preemptor{Namespace: "b", Requests: cpu("1")},
			want:      []types.UID{"a-cpu-1"}, ok: true,
		},
		{
			name: "the preemptor's min is checked only on short resources",
			tree: mustBuild(t, treeOf(spec{
				Name: "root", Min: list("nvidia.com/gpu", "4"), Max: list("nvidia.com/gpu", "4"),
				Children: []spec{
					{Name: "a", Namespaces: []string{"a"}, Min: list("nvidia.com/gpu", "2"), Max: list("nvidia.com/gpu", "4")},
					{Name: "b", Namespaces: []string{"b"}, Min: list("nvidia.com/gpu", "2"), Max: list("nvidia.com/gpu", "4")},
				},
			})),
			running: []running{
				{uid: "a-1", namespace: "a", requests: list("nvidia.com/gpu", "2", "cpu", "8")},
				{uid: "a-2", namespace: "a", requests: list("nvidia.com/gpu", "2", "cpu", "8")},
			},
			// b has no cpu min (zero) but cpu is not short: only the GPU is.
			preemptor: Preemptor{Namespace: "b", Requests: list("nvidia.com/gpu", "1", "cpu", "4")},
			want:      []types.UID{"a-1"}, ok: true,
		},
		{
			name: "unknown, ungoverned and repeated candidates are ignored",
			tree: mustBuild(t, flat),
			running: []running{
				{uid: "a-1", namespace: "a", requests: cpu("5")},
				{uid: "a-2", namespace: "a", requests: cpu("5")},
				{uid: "elsewhere", namespace: "default", requests: cpu("5")},
			},
			preemptor: Preemptor{Namespace: "b", Requests: cpu("5")},
			want:      []types.UID{"a-1"}, ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var candidates []Candidate
			for _, r := range tt.running {
				tt.tree.AddRequests(types.UID(r.uid), r.namespace, r.requests)
				candidates = append(candidates, Candidate{
					UID: types.UID(r.uid), Priority: r.priority, Created: time.Unix(r.created, 0), ViolatesPDB: r.pdb,
				})
			}
			candidates = append(candidates, Candidate{UID: "ghost"})
			if len(candidates) > 1 {
				candidates = append(candidates, candidates[0])
			}
			before := tt.tree.Status()
			plan, ok := tt.tree.PlanReclaim(tt.preemptor, candidates)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (plan %v)", ok, tt.ok, plan.Victims)
			}
			if diff := cmp.Diff(tt.want, plan.Victims); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.tree.Status(), quantityEqual); diff != "" {
				t.Errorf("planning changed the tree (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRatioCompare(t *testing.T) {
	tests := []struct {
		a, b ratio
		want int
	}{
		{ratio{1, 2}, ratio{2, 4}, 0},
		{ratio{3, 2}, ratio{1, 1}, 1},
		{ratio{1, 3}, ratio{1, 2}, -1},
		{ratio{5, 0}, ratio{1 << 62, 1}, 1},
		{ratio{1, 1}, ratio{5, 0}, -1},
		{ratio{5, 0}, ratio{7, 0}, 0},
		{ratio{1 << 62, 3}, ratio{1 << 61, 1}, -1}, // cross products overflow int64
	}
	for _, tt := range tests {
		if got := tt.a.compare(tt.b); got != tt.want {
			t.Errorf("%v.compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
