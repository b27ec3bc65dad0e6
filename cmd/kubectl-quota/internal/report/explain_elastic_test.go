package report

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func cpuRow(used, request, min, max, borrowed string, binding bool) NodeResource {
	return NodeResource{Resource: "cpu", Used: used, Request: request, Min: min, Max: max, Borrowed: borrowed, Binding: binding}
}

// pathCPU is a path with only the cpu rows kept, as the seed's pods ask for cpu.
func pathCPU(path []QuotaNode) map[string]NodeResource {
	out := map[string]NodeResource{}
	for _, n := range path {
		for _, r := range n.Resources {
			if r.Resource == "cpu" {
				out[n.Name] = r
			}
		}
	}
	return out
}

// TestExplainSeedElasticQuota: seed 000 after nginx1, four 5-cpu pods running in
// root.a.1 (max 20), the fifth pending.
func TestExplainSeedElasticQuota(t *testing.T) {
	tree := seedTree(t)
	running := replicaPods("namespace1", "nginx1", 4, "5", "seed-1", 10*time.Minute)
	pending := replicaPods("namespace1", "nginx1", 5, "5", "", 10*time.Minute)[4]
	e := Explain(Snapshot{Now: now, Trees: treesOf(withStatus(t, tree, running)), Pods: running}, pending, DefaultTop)

	if want := `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`; e.Verdict != want {
		t.Errorf("verdict\n got %s\nwant %s", e.Verdict, want)
	}
	eq := e.ElasticQuota
	if eq == nil {
		t.Fatal("no elastic quota explanation")
	}
	if eq.Tree != "kube-system/elasticquotatree" || eq.FiguresFrom != FromStatus || eq.Leaf != "root.a.1" || eq.Admitted {
		t.Errorf("tree %q figures %q leaf %q admitted %v", eq.Tree, eq.FiguresFrom, eq.Leaf, eq.Admitted)
	}
	if want := `exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20`; eq.Message != want {
		t.Errorf("message %q, want %q", eq.Message, want)
	}
	wantPath := map[string]NodeResource{
		"root.a.1": cpuRow("20", "5", "10", "20", "10", true),
		"root.a":   cpuRow("20", "5", "20", "40", "0", false),
		"root":     cpuRow("20", "5", "40", "40", "0", false),
	}
	if diff := cmp.Diff(wantPath, pathCPU(eq.Path)); diff != "" {
		t.Errorf("path cpu (-want +got):\n%s", diff)
	}
	var order []string
	for _, n := range eq.Path {
		order = append(order, n.Name)
	}
	if diff := cmp.Diff([]string{"root.a.1", "root.a", "root"}, order); diff != "" {
		t.Errorf("path order, leaf first (-want +got):\n%s", diff)
	}
	wantContributors := []Contributor{{Namespace: "namespace1", Workload: "Deployment/nginx1", Pods: 4,
		Requests: map[string]string{"cpu": "20"}, Newest: now.Add(-10*time.Minute + 3*time.Second)}}
	if diff := cmp.Diff(wantContributors, eq.Contributors); diff != "" || eq.ContributorsOf != "root.a.1" {
		t.Errorf("contributors of %q (-want +got):\n%s", eq.ContributorsOf, diff)
	}
}

func TestExplainElasticQuotaCases(t *testing.T) {
	tree := seedTree(t)
	ns1 := replicaPods("namespace1", "nginx1", 4, "5", "seed-1", 10*time.Minute)
	// Seed 000's last step: every leaf on its min, 10 cpu each.
	full := slices.Concat(
		replicaPods("namespace1", "nginx1", 2, "5", "seed-1", 40*time.Minute),
		replicaPods("namespace2", "nginx2", 2, "5", "seed-1", 30*time.Minute),
		replicaPods("namespace3", "nginx3", 2, "5", "seed-2", 20*time.Minute),
		replicaPods("namespace4", "nginx4", 2, "5", "seed-2", 10*time.Minute),
	)
	pendingIn := func(ns, cpu string) *corev1.Pod {
		p := replicaPods(ns, "late", 1, cpu, "", time.Minute)[0]
		p.Name = "late-" + ns
		return p
	}
	stale := withStatus(t, tree, ns1)
	stale.Generation = 2
	invalid := withStatus(t, tree, ns1)
	invalid.Generation, invalid.Status.ObservedGeneration = 2, 2
	invalid.Spec.Root.Children[0].Children[0].Min = list("cpu", "30") // min > max
	invalid.Status.Conditions[0].Message = "generation 2 is invalid; generation 1 stays in force"
	behind := withStatus(t, tree, ns1[:3])
	nominated := pendingIn("namespace1", "5")
	nominated.Status.NominatedNodeName = "seed-2"
	bigMemory := pendingIn("namespace1", "5")
	bigMemory.Spec.Containers[0].Resources.Requests = list("cpu", "5", "memory", "25Gi")

	tests := []struct {
		name        string
		trees       []*schedulingv1beta1.ElasticQuotaTree
		pods        []*corev1.Pod
		pod         *corev1.Pod
		top         int
		wantVerdict string
		wantFrom    string
		wantNote    string
		wantNoNotes bool
		wantPath    map[string]NodeResource
		wantContrib []string
		wantMore    int
	}{{
		name:        "no status yet: figures from the bound pods",
		trees:       treesOf(tree),
		pods:        ns1,
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
		wantFrom:    FromPods,
		wantNote:    "the scheduler has not written status.quotas; figures are summed from the bound pods",
	}, {
		name:        "status of an older generation is not used",
		trees:       treesOf(stale),
		pods:        ns1,
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
		wantFrom:    FromPods,
		wantNote:    "status.quotas describes generation 1, the spec is generation 2",
	}, {
		// Status lags: a pod bound since the last write counts.
		name:        "status written before a pod was bound: the pod counts",
		trees:       treesOf(behind),
		pods:        ns1,
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
		wantFrom:    FromStatus,
		wantNoNotes: true,
		wantPath: map[string]NodeResource{
			"root.a.1": cpuRow("20", "5", "10", "20", "10", true),
			"root.a":   cpuRow("20", "5", "20", "40", "0", false),
		},
	}, {
		// Status lags the other way too: a pod that left counts no more.
		name:        "status written before a pod left: it counts no more",
		trees:       treesOf(withStatus(t, tree, ns1)),
		pods:        ns1[:3],
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: "Pending: not scheduled yet",
		wantFrom:    FromStatus,
		wantNoNotes: true,
		wantPath:    map[string]NodeResource{"root.a.1": cpuRow("15", "5", "10", "20", "5", false)},
	}, {
		// What no pod shows (a gang's reservation, a reclaim's hold) comes
		// from status, with its age.
		name:        "status holds quota for a gang: counted on top of the pods",
		trees:       treesOf(withHeld(withStatus(t, tree, ns1[:3]), "root.a.1", "5", 30*time.Second)),
		pods:        ns1[:3],
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
		wantFrom:    FromStatus,
		wantNote:    "root.a.1 hold quota no bound pod shows (gangs' reservations, reclaims' holds), as the scheduler measured it 30s ago",
		wantPath:    map[string]NodeResource{"root.a.1": cpuRow("20", "5", "10", "20", "10", true)},
	}, {
		// The held quota was bound since status was written: the pods show it.
		name:        "held quota that no longer fits beside the pods: only what fits counts",
		trees:       treesOf(withHeld(withStatus(t, tree, ns1[:3]), "root.a.1", "10", 8*time.Second)),
		pods:        ns1,
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
		wantFrom:    FromStatus,
		wantNote:    "the held quota measured 8s ago no longer fits beside the bound pods on root.a.1",
		wantPath:    map[string]NodeResource{"root.a.1": cpuRow("20", "5", "10", "20", "10", true)},
	}, {
		name:        "status and the pods agree: no note",
		trees:       treesOf(withStatus(t, tree, ns1[:3])),
		pods:        ns1[:3],
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: "Pending: not scheduled yet",
		wantFrom:    FromStatus,
		wantNoNotes: true,
		wantPath:    map[string]NodeResource{"root.a.1": cpuRow("15", "5", "10", "20", "5", false)},
	}, {
		name:        "an invalid generation: the last valid one, from status, is judged",
		trees:       treesOf(invalid),
		pods:        ns1,
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20)`,
		wantFrom:    FromStatus,
		wantNote:    "generation 2 of kube-system/elasticquotatree is invalid",
		wantPath:    map[string]NodeResource{"root.a.1": cpuRow("20", "5", "10", "20", "10", true)},
	}, {
		name:        "every leaf on its min: the root binds, and everyone raised it",
		trees:       treesOf(withStatus(t, tree, full)),
		pods:        full,
		pod:         pendingIn("namespace4", "5"),
		top:         2,
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root" on cpu (used 40 + request 5 > max 40)`,
		wantFrom:    FromStatus,
		wantPath: map[string]NodeResource{
			"root.b.2": cpuRow("10", "5", "10", "20", "0", false),
			"root.b":   cpuRow("20", "5", "20", "40", "0", false),
			"root":     cpuRow("40", "5", "40", "40", "0", true),
		},
		// All four sum 10 cpu: the most recent first.
		wantContrib: []string{"namespace4/Deployment/nginx4", "namespace3/Deployment/nginx3"},
		wantMore:    2,
	}, {
		name:        "cpu and memory both over: both named",
		trees:       treesOf(withStatus(t, tree, ns1)),
		pods:        ns1,
		pod:         bigMemory,
		wantVerdict: `Pending: refused by ElasticQuotaTree node "root.a.1" on cpu (used 20 + request 5 > max 20), memory (used 0 + request 25Gi > max 20Gi)`,
		wantFrom:    FromStatus,
	}, {
		name:        "a namespace no leaf lists is not limited",
		trees:       treesOf(withStatus(t, tree, ns1)),
		pods:        ns1,
		pod:         pendingIn("elsewhere", "5"),
		wantVerdict: "Pending: not scheduled yet",
		wantFrom:    FromStatus,
	}, {
		name:        "a nominated pod waits for its reclaim",
		trees:       treesOf(withStatus(t, tree, ns1)),
		pods:        ns1,
		pod:         nominated,
		wantVerdict: "Pending: nominated to node seed-2, waiting for preempted pods to leave",
		wantFrom:    FromStatus,
	}, {
		name:        "a running pod is not judged again",
		trees:       treesOf(withStatus(t, tree, ns1)),
		pods:        ns1,
		pod:         ns1[0],
		wantVerdict: "Running on node seed-1",
		wantFrom:    FromStatus,
		wantPath:    map[string]NodeResource{"root.a.1": cpuRow("20", "5", "10", "20", "10", false)},
	}, {
		name:        "no tree in kube-system",
		trees:       treesOf(&schedulingv1beta1.ElasticQuotaTree{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "mine"}}),
		pod:         pendingIn("namespace1", "5"),
		wantVerdict: "Pending: not scheduled yet",
		wantNote:    "no ElasticQuotaTree in kube-system",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := tt.top
			if top == 0 {
				top = DefaultTop
			}
			e := Explain(Snapshot{Now: now, Trees: tt.trees, Pods: tt.pods}, tt.pod, top)
			if e.Verdict != tt.wantVerdict {
				t.Errorf("verdict\n got %s\nwant %s", e.Verdict, tt.wantVerdict)
			}
			if tt.wantNote != "" && !slices.ContainsFunc(e.Notes, func(n string) bool { return strings.Contains(n, tt.wantNote) }) {
				t.Errorf("no note containing %q in %q", tt.wantNote, e.Notes)
			}
			if tt.wantNoNotes && len(e.Notes) > 0 {
				t.Errorf("notes %q, want none", e.Notes)
			}
			if tt.wantFrom == "" {
				if e.ElasticQuota != nil {
					t.Errorf("an elastic quota explanation without a tree in force: %+v", e.ElasticQuota)
				}
				return
			}
			if e.ElasticQuota == nil || e.ElasticQuota.FiguresFrom != tt.wantFrom {
				t.Fatalf("elastic quota explanation %+v, want figures from %s", e.ElasticQuota, tt.wantFrom)
			}
			got := pathCPU(e.ElasticQuota.Path)
			for node, want := range tt.wantPath {
				if diff := cmp.Diff(want, got[node]); diff != "" {
					t.Errorf("%s cpu (-want +got):\n%s", node, diff)
				}
			}
			var contrib []string
			for _, c := range e.ElasticQuota.Contributors {
				contrib = append(contrib, c.Namespace+"/"+c.Workload)
			}
			if tt.wantContrib != nil {
				if diff := cmp.Diff(tt.wantContrib, contrib); diff != "" || e.ElasticQuota.MoreContributors != tt.wantMore {
					t.Errorf("contributors, %d more (-want +got):\n%s", e.ElasticQuota.MoreContributors, diff)
				}
			}
		})
	}
}

// TestExplainStatusWrittenBeforeChurn: status was written while namespace1's
// leaf held 20 cpu; since, those pods left and namespace2's leaf filled up.
// The figures are the live pods' (no held part): no quota node is shown
// past its max, as a mix of the two moments would show the root.
func TestExplainStatusWrittenBeforeChurn(t *testing.T) {
	tree := seedTree(t)
	before := slices.Concat(replicaPods("namespace1", "nginx1", 4, "5", "seed-1", 20*time.Minute),
		replicaPods("namespace3", "nginx3", 4, "5", "seed-2", 20*time.Minute))
	now := slices.Concat(replicaPods("namespace2", "nginx2", 4, "5", "seed-1", time.Minute),
		replicaPods("namespace3", "nginx3", 4, "5", "seed-2", 20*time.Minute))
	pending := replicaPods("namespace4", "late", 1, "5", "", 0)[0]
	e := Explain(Snapshot{Now: now[0].CreationTimestamp.Add(time.Minute), Trees: treesOf(withStatus(t, tree, before)), Pods: now}, pending, DefaultTop)
	if want := `Pending: refused by ElasticQuotaTree node "root" on cpu (used 40 + request 5 > max 40)`; e.Verdict != want {
		t.Errorf("verdict\n got %s\nwant %s", e.Verdict, want)
	}
	want := map[string]string{"root": "40", "root.a": "20", "root.a.1": "0", "root.a.2": "20", "root.b": "20", "root.b.1": "20", "root.b.2": "0"}
	view := Tree(Snapshot{Trees: treesOf(withStatus(t, tree, before)), Pods: now})
	got := map[string]string{}
	for _, n := range view.Trees[0].Nodes {
		for _, r := range n.Resources {
			if r.Resource == "cpu" {
				got[n.Name] = r.Used
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cpu used by quota node (-want +got):\n%s", diff)
	}
}
