package elastic

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func TestSeedTreeStructure(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	if got := tree.Object(); got != "kube-system/elasticquotatree" {
		t.Errorf("Object() = %q", got)
	}
	if diff := cmp.Diff([]corev1.ResourceName{"cpu", "memory", "nvidia.com/gpu"}, tree.ResourceNames()); diff != "" {
		t.Errorf("ResourceNames (-want +got):\n%s", diff)
	}
	var paths []string
	for _, n := range tree.Nodes() {
		paths = append(paths, n.Path())
	}
	wantPaths := []string{"root", "root/root.a", "root/root.a/root.a.1", "root/root.a/root.a.2", "root/root.b", "root/root.b/root.b.1", "root/root.b/root.b.2"}
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("depth-first paths (-want +got):\n%s", diff)
	}
	leaf, ok := tree.LeafFor("namespace3")
	if !ok || leaf.Name() != "root.b.1" || leaf.Depth() != 3 || !leaf.IsLeaf() {
		t.Fatalf("LeafFor(namespace3) = %q depth %d leaf %v, found %v", leaf.Name(), leaf.Depth(), leaf.IsLeaf(), ok)
	}
	parent, ok := leaf.Parent()
	if !ok || parent.Name() != "root.b" {
		t.Errorf("Parent = %q, %v", parent.Name(), ok)
	}
	if _, ok := tree.Root().Parent(); ok {
		t.Error("root has a parent")
	}
	var children []string
	for _, c := range parent.Children() {
		children = append(children, c.Name())
	}
	if diff := cmp.Diff([]string{"root.b.1", "root.b.2"}, children); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"namespace3"}, leaf.Namespaces()); diff != "" {
		t.Errorf("Namespaces (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(list("cpu", "10", "memory", "10Gi", "nvidia.com/gpu", "1"), leaf.Min(), quantityEqual); diff != "" {
		t.Errorf("Min (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(list("cpu", "20", "memory", "20Gi", "nvidia.com/gpu", "2"), leaf.Max(), quantityEqual); diff != "" {
		t.Errorf("Max (-want +got):\n%s", diff)
	}
	if _, ok := tree.LeafFor("kube-system"); ok {
		t.Error("an unlisted namespace has a leaf")
	}
	if n, ok := tree.Node("root.a"); !ok || n.IsLeaf() {
		t.Errorf("Node(root.a) = %v, leaf %v", ok, n.IsLeaf())
	}
	if _, ok := tree.Node("nope"); ok {
		t.Error("Node(nope) found")
	}
}

func TestResourceFlavorInheritance(t *testing.T) {
	flavor := func(name string) map[string]string {
		return map[string]string{schedulingv1beta1.AttributeResourceFlavors: name}
	}
	tree := mustBuild(t, treeOf(spec{
		Name: "root", Min: cpu("10"), Max: cpu("10"),
		Children: []spec{
			{Name: "spot", Attributes: flavor("spot"), Children: []spec{
				{Name: "spot.a", Namespaces: []string{"a"}},
				{Name: "spot.b", Namespaces: []string{"b"}, Attributes: flavor("spot-gpu")},
			}},
			{Name: "plain", Namespaces: []string{"c"}, Attributes: map[string]string{"other": "x"}},
		},
	}))
	for ns, want := range map[string]string{"a": "spot", "b": "spot-gpu", "c": ""} {
		leaf, _ := tree.LeafFor(ns)
		if got := leaf.ResourceFlavor(); got != want {
			t.Errorf("ResourceFlavor of %s = %q, want %q", ns, got, want)
		}
	}
}

func TestStatusFigures(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	for i := range 4 {
		tree.AddPod(pod("a1-"+string(rune('0'+i)), "namespace1", cpu("5")))
	}
	tree.AddPod(pod("a2-0", "namespace2", list("cpu", "5", "memory", "12Gi")))
	tree.AddPod(pod("elsewhere", "default", cpu("100")))

	status := tree.Status()
	if len(status) != 7 {
		t.Fatalf("Status has %d nodes, want 7", len(status))
	}
	want := map[string]schedulingv1beta1.QuotaNodeStatus{
		"root": {
			Name: "root",
			Used: list("cpu", "25", "memory", "12Gi", "nvidia.com/gpu", "0"),
			Min:  list("cpu", "40", "memory", "40Gi", "nvidia.com/gpu", "4"), Max: list("cpu", "40", "memory", "40Gi", "nvidia.com/gpu", "4"),
			Lent: list("cpu", "15", "memory", "28Gi", "nvidia.com/gpu", "4"),
		},
		"root.a.1": {
			Name: "root.a.1", Parent: "root.a",
			Used: list("cpu", "20", "memory", "0", "nvidia.com/gpu", "0"),
			Min:  list("cpu", "10", "memory", "10Gi", "nvidia.com/gpu", "1"), Max: list("cpu", "20", "memory", "20Gi", "nvidia.com/gpu", "2"),
			Borrowed: list("cpu", "10"),
			Lent:     list("memory", "10Gi", "nvidia.com/gpu", "1"),
		},
		"root.a.2": {
			Name: "root.a.2", Parent: "root.a",
			Used: list("cpu", "5", "memory", "12Gi", "nvidia.com/gpu", "0"),
			Min:  list("cpu", "10", "memory", "10Gi", "nvidia.com/gpu", "1"), Max: list("cpu", "20", "memory", "40Gi", "nvidia.com/gpu", "2"),
			Borrowed: list("memory", "2Gi"),
			Lent:     list("cpu", "5", "nvidia.com/gpu", "1"),
		},
	}
	for _, got := range status {
		w, ok := want[got.Name]
		if !ok {
			continue
		}
		if diff := cmp.Diff(w, got, quantityEqual, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("status of %s (-want +got):\n%s", got.Name, diff)
		}
		one, _ := tree.Figures(got.Name)
		if diff := cmp.Diff(got, one, quantityEqual); diff != "" {
			t.Errorf("Figures(%s) differs from Status (-Status +Figures):\n%s", got.Name, diff)
		}
	}
	if _, ok := tree.Figures("nope"); ok {
		t.Error("Figures(nope) found")
	}
	used, _ := tree.Used("root.a")
	if diff := cmp.Diff(list("cpu", "25", "memory", "12Gi", "nvidia.com/gpu", "0"), used, quantityEqual); diff != "" {
		t.Errorf("Used(root.a) (-want +got):\n%s", diff)
	}
	if _, ok := tree.Used("nope"); ok {
		t.Error("Used(nope) found")
	}
}

func TestStatusListsExplicitZeroMinAndUsageOutsideNamedResources(t *testing.T) {
	tree := mustBuild(t, treeOf(spec{
		Name: "root", Min: list("cpu", "4", "memory", "8Gi"), Max: list("cpu", "4", "memory", "8Gi"),
		Children: []spec{{Name: "leaf", Namespaces: []string{"ns"}, Min: list("cpu", "0"), Max: list("cpu", "4")}},
	}))
	tree.AddPod(pod("p", "ns", list("cpu", "1", "memory", "1Gi")))
	got, _ := tree.Figures("leaf")
	want := schedulingv1beta1.QuotaNodeStatus{
		Name: "leaf", Parent: "root",
		Used:     list("cpu", "1", "memory", "1Gi"),
		Min:      list("cpu", "0"),
		Max:      list("cpu", "4"),
		Borrowed: list("cpu", "1", "memory", "1Gi"),
	}
	if diff := cmp.Diff(want, got, quantityEqual, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
}

// TestStatusHeld: held sums, per quota node, the charges the caller selects;
// the other figures are Status's, and a node holding nothing lists no held.
func TestStatusHeld(t *testing.T) {
	tree := mustBuild(t, seedTree(t))
	tree.AddPod(pod("bound", "namespace1", cpu("5")))
	tree.AddRequests("reservation/a1", "namespace1", cpu("10"))
	tree.AddRequests("hold/b1", "namespace3", list("cpu", "2", "memory", "1Gi"))
	tree.AddRequests("hold/elsewhere", "default", cpu("100"))
	held := map[types.UID]bool{"reservation/a1": true, "hold/b1": true, "hold/elsewhere": true}
	status := tree.StatusHeld(func(uid types.UID) bool { return held[uid] })
	plain := tree.Status()
	want := map[string]corev1.ResourceList{
		"root":     list("cpu", "12", "memory", "1Gi"),
		"root.a":   cpu("10"),
		"root.a.1": cpu("10"),
		"root.b":   list("cpu", "2", "memory", "1Gi"),
		"root.b.1": list("cpu", "2", "memory", "1Gi"),
	}
	for i, got := range status {
		if diff := cmp.Diff(want[got.Name], got.Held, quantityEqual, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("held of %s (-want +got):\n%s", got.Name, diff)
		}
		got.Held = nil
		if diff := cmp.Diff(plain[i], got, quantityEqual); diff != "" {
			t.Errorf("the other figures of %s differ from Status (-Status +StatusHeld):\n%s", got.Name, diff)
		}
	}
}
