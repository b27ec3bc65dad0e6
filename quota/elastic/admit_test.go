package elastic

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestAdmit(t *testing.T) {
	cpuOnlyLeaf := treeOf(spec{
		Name: "root", Min: list("cpu", "10", "memory", "10Gi"), Max: list("cpu", "10", "memory", "10Gi"),
		Children: []spec{{Name: "cpu-only", Namespaces: []string{"ns"}, Max: cpu("4")}},
	})
	tests := []struct {
		name      string
		tree      func(t *testing.T) *Tree
		namespace string
		request   corev1.ResourceList
		admitted  bool
		governed  bool
		message   string
		reason    string
	}{
		{
			name: "fits with borrowing", tree: seedWith(map[string]int{"namespace1": 3}),
			namespace: "namespace1", request: cpu("5"), admitted: true, governed: true,
		},
		{
			name: "leaf max", tree: seedWith(map[string]int{"namespace1": 4}),
			namespace: "namespace1", request: cpu("5"), governed: true,
			message: `exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20`,
			reason:  `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`,
		},
		{
			name: "root max binds after borrowing", tree: seedWith(map[string]int{"namespace1": 4, "namespace2": 4}),
			namespace: "namespace3", request: cpu("5"), governed: true,
			message: `exceeded elastic quota "root": cpu used 40, requested 5, max 40`,
			reason:  `exceeded elastic quota: "ElasticQuotaTree/root", resources: cpu`,
		},
		{
			name: "all dimensions or none: cpu fits, memory does not", tree: seedWith(nil),
			namespace: "namespace1", request: list("cpu", "1", "memory", "21Gi"), governed: true,
			message: `exceeded elastic quota "root.a.1": memory used 0, requested 21Gi, max 20Gi`,
			reason:  `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: memory`,
		},
		{
			name: "several nodes and resources, deepest first, resources sorted", tree: seedWith(map[string]int{"namespace1": 4, "namespace2": 4}),
			namespace: "namespace1", request: list("nvidia.com/gpu", "5", "cpu", "1"), governed: true,
			message: `exceeded elastic quota "root.a.1": cpu used 20, requested 1, max 20; nvidia.com/gpu used 0, requested 5, max 2; ` +
				`exceeded elastic quota "root.a": cpu used 40, requested 1, max 40; nvidia.com/gpu used 0, requested 5, max 4; ` +
				`exceeded elastic quota "root": cpu used 40, requested 1, max 40; nvidia.com/gpu used 0, requested 5, max 4`,
			reason: `exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu, nvidia.com/gpu`,
		},
		{
			name: "a resource missing from max is unlimited",
			tree: func(t *testing.T) *Tree { return mustBuild(t, cpuOnlyLeaf) }, namespace: "ns",
			request: list("cpu", "1", "memory", "9Gi"), admitted: true, governed: true,
		},
		{
			name: "resources the tree does not name are not limited", tree: seedWith(nil),
			namespace: "namespace1", request: list("ephemeral-storage", "1Ti"), admitted: true, governed: true,
		},
		{
			name: "ungoverned namespace", tree: seedWith(map[string]int{"namespace1": 4, "namespace2": 4}),
			namespace: "default", request: cpu("100"), admitted: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.tree(t).Admit(tt.namespace, tt.request)
			if v.Admitted() != tt.admitted || v.Governed() != tt.governed {
				t.Errorf("Admitted=%v Governed=%v, want %v %v", v.Admitted(), v.Governed(), tt.admitted, tt.governed)
			}
			if got := v.Message(); got != tt.message {
				t.Errorf("Message() =\n%s\nwant\n%s", got, tt.message)
			}
			if got := v.Reason(); got != tt.reason {
				t.Errorf("Reason() = %s, want %s", got, tt.reason)
			}
		})
	}
}

// seedWith builds the seed tree with running 5-cpu pods per namespace.
func seedWith(running map[string]int) func(t *testing.T) *Tree {
	return func(t *testing.T) *Tree {
		tree := mustBuild(t, seedTree(t))
		for ns, n := range running {
			for i := range n {
				tree.AddPod(pod(ns+"-"+string(rune('a'+i)), ns, cpu("5")))
			}
		}
		return tree
	}
}

func TestVerdictDetails(t *testing.T) {
	tree := seedWith(map[string]int{"namespace1": 4})(t)
	v := tree.Admit("namespace1", cpu("5"))
	want := Verdict{Leaf: "root.a.1", Excesses: []Excess{{Node: "root.a.1", Depth: 3, Resources: []ResourceExcess{{
		Resource: "cpu", Used: cpu("20")["cpu"], Requested: cpu("5")["cpu"], Max: cpu("20")["cpu"],
	}}}}}
	if diff := cmp.Diff(want, v, quantityEqual); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
}

func TestLoweredMaxStillAdmitsUnrelatedResources(t *testing.T) {
	// The leaf is over its (lowered) cpu max; a request for memory only must
	// not be refused on cpu.
	tree := mustBuild(t, flatTree("cpu", "10", [3]string{"ns", "0", "2"}))
	tree.AddRequests("p", "ns", cpu("5"))
	if v := tree.Admit("ns", list("memory", "1Gi")); !v.Admitted() {
		t.Errorf("memory-only request refused: %s", v.Message())
	}
	if v := tree.Admit("ns", cpu("1m")); v.Admitted() {
		t.Error("cpu request admitted over max")
	}
}

func TestAdmitDoesNotAllocateWhenItFits(t *testing.T) {
	tree := seedWith(map[string]int{"namespace1": 2})(t)
	request := list("cpu", "5", "memory", "1Gi", "nvidia.com/gpu", "1")
	if allocs := testing.AllocsPerRun(200, func() {
		if !tree.Admit("namespace1", request).Admitted() {
			t.Fatal("refused")
		}
	}); allocs != 0 {
		t.Errorf("Admit allocates %v times per call, want 0", allocs)
	}
	scratch := tree.Scratch()
	if allocs := testing.AllocsPerRun(200, func() {
		if !scratch.Admit("namespace2", request).Admitted() {
			t.Fatal("refused")
		}
	}); allocs != 0 {
		t.Errorf("Scratch.Admit allocates %v times per call, want 0", allocs)
	}
}

// TestAdmitRequest: a converted request gets the verdicts of Admit, on the
// tree that made it and, converted again, on a rebuilt tree.
func TestAdmitRequest(t *testing.T) {
	spec := flatTree("cpu", "10", [3]string{"a", "4", "6"}, [3]string{"b", "4", "6"})
	tree := mustBuild(t, spec)
	tree.AddRequests("p1", "a", cpu("5"))
	small, big := tree.Request(cpu("1")), tree.Request(cpu("2"))
	for _, tc := range []struct {
		tree      *Tree
		namespace string
		r         Request
	}{{tree, "a", small}, {tree, "a", big}, {tree, "elsewhere", big}} {
		want := tc.tree.Admit(tc.namespace, tc.r.Requests())
		if got := tc.tree.AdmitRequest(tc.namespace, tc.r); !cmp.Equal(want, got, quantityEqual) {
			t.Errorf("AdmitRequest(%s, %v) = %+v, Admit = %+v", tc.namespace, tc.r.Requests(), got, want)
		}
	}
	// A larger max on the rebuilt tree: the old Request is converted anew.
	wider := flatTree("cpu", "10", [3]string{"a", "4", "8"}, [3]string{"b", "4", "6"})
	rebuilt, err := tree.Rebuild(wider)
	if err != nil {
		t.Fatal(err)
	}
	if big.For(rebuilt) || !big.For(tree) {
		t.Error("For does not tell the trees apart")
	}
	if v := rebuilt.AdmitRequest("a", big); !v.Admitted() {
		t.Errorf("2 cpu on a (5 of 8 used) refused by the rebuilt tree: %s", v.Message())
	}
	if v := tree.AdmitRequest("a", big); v.Admitted() {
		t.Error("2 cpu on a (5 of 6 used) admitted by the old tree")
	}
	if testing.AllocsPerRun(100, func() { tree.AdmitRequest("a", small) }) != 0 {
		t.Error("AdmitRequest allocates when the request fits")
	}
}
