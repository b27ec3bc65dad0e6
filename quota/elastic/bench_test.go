package elastic

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// treeTops are the first-level widths of the benchmarked trees: 112, 334 and
// 1,000 quota nodes, all four levels deep.
var treeTops = []int{1, 3, 9}

// wideTree has 1 + top + 10 top + 100 top quota nodes (1,000 for top = 9),
// four levels deep, and one namespace per leaf.
func wideTree(tb testing.TB, top int) (*Tree, []string) {
	resourcesOf := func(cpuCores, memGi, gpus int) corev1.ResourceList {
		return list("cpu", fmt.Sprint(cpuCores), "memory", fmt.Sprintf("%dGi", memGi), "nvidia.com/gpu", fmt.Sprint(gpus))
	}
	root := spec{Name: "root", Min: resourcesOf(1000*top, 1000*top, 100*top), Max: resourcesOf(1000*top, 1000*top, 100*top)}
	var namespaces []string
	for i := range top {
		a := spec{Name: fmt.Sprintf("r.%d", i), Min: resourcesOf(1000, 1000, 100), Max: resourcesOf(2000, 2000, 200)}
		for j := range 10 {
			b := spec{Name: fmt.Sprintf("r.%d.%d", i, j), Min: resourcesOf(100, 100, 10), Max: resourcesOf(200, 200, 20)}
			for k := range 10 {
				ns := fmt.Sprintf("ns-%d-%d-%d", i, j, k)
				namespaces = append(namespaces, ns)
				b.Children = append(b.Children, spec{
					Name: fmt.Sprintf("r.%d.%d.%d", i, j, k), Namespaces: []string{ns},
					Min: resourcesOf(10, 10, 1), Max: resourcesOf(20, 20, 2),
				})
			}
			a.Children = append(a.Children, b)
		}
		root.Children = append(root.Children, a)
	}
	tree := mustBuild(tb, treeOf(root))
	if got, want := len(tree.Nodes()), 1+111*top; got != want {
		tb.Fatalf("tree has %d nodes, want %d", got, want)
	}
	for i, ns := range namespaces {
		tree.AddRequests(types.UID(fmt.Sprint("running-", i)), ns, list("cpu", "5", "memory", "5Gi"))
	}
	return tree, namespaces
}

func BenchmarkTreeAdmit(b *testing.B) {
	for _, top := range treeTops {
		tree, namespaces := wideTree(b, top)
		request := list("cpu", "500m", "memory", "1Gi", "nvidia.com/gpu", "1")
		b.Run(fmt.Sprintf("nodes=%d/depth=4", len(tree.Nodes())), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !tree.Admit(namespaces[i%len(namespaces)], request).Admitted() {
					b.Fatal("refused")
				}
				i++
			}
		})
	}
}

func BenchmarkTreeAddRemovePod(b *testing.B) {
	tree, namespaces := wideTree(b, treeTops[len(treeTops)-1])
	request := list("cpu", "500m", "memory", "1Gi")
	uids := make([]types.UID, len(namespaces))
	for i := range uids {
		uids[i] = types.UID(fmt.Sprint("bench-", i))
	}
	b.Run("nodes=1000/depth=4", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			n := i % len(namespaces)
			tree.AddRequests(uids[n], namespaces[n], request)
			tree.RemovePod(uids[n])
			i++
		}
	})
}

func BenchmarkPlanReclaim(b *testing.B) {
	// Seed tree, root.a borrowing all of root.b's idle min; root.b.1 asks.
	tree := mustBuild(b, seedTree(b))
	var candidates []Candidate
	for i := range 8 {
		ns := []string{"namespace1", "namespace2"}[i%2]
		uid := types.UID(fmt.Sprint("a-", i))
		tree.AddRequests(uid, ns, cpu("5"))
		candidates = append(candidates, Candidate{UID: uid, Created: time.Unix(int64(i), 0)})
	}
	preemptor := Preemptor{Namespace: "namespace3", Requests: cpu("10")}
	b.Run("candidates=8", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if plan, ok := tree.PlanReclaim(preemptor, candidates); !ok || len(plan.Victims) != 2 {
				b.Fatalf("plan %v %v", plan.Victims, ok)
			}
		}
	})
}
