package report

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func TestTreeReport(t *testing.T) {
	inForce := withStatus(t, seedTree(t), replicaPods("namespace1", "nginx1", 4, "5", "seed-1", time.Minute))
	ignored := &schedulingv1beta1.ElasticQuotaTree{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "mine", Generation: 3},
		Spec: schedulingv1beta1.ElasticQuotaTreeSpec{Root: schedulingv1beta1.ElasticQuotaSpec{
			Name: "root", Min: list("cpu", "1"), Max: list("cpu", "1"),
			Children: []schedulingv1beta1.ElasticQuotaSpec{{Name: "leaf", Namespaces: []string{"team"}, Max: list("cpu", "1")}},
		}},
		Status: schedulingv1beta1.ElasticQuotaTreeStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{
			{Type: "Valid", Status: "True", Reason: "Valid", Message: "the tree satisfies every rule"},
			{Type: "Active", Status: "False", Reason: "NotInKubeSystem", Message: "only an ElasticQuotaTree in kube-system is in force; this one is ignored"},
		}},
	}
	invalid := ignored.DeepCopy()
	invalid.Name = "broken"
	invalid.Spec.Root.Children[0].Min = list("cpu", "2", "memory", "1Gi")

	r := Tree(Snapshot{Now: now, Trees: treesOf(invalid, ignored, inForce)})
	var names []string
	for _, tv := range r.Trees {
		names = append(names, tv.Tree)
	}
	if diff := cmp.Diff([]string{"kube-system/elasticquotatree", "team/broken", "team/mine"}, names); diff != "" {
		t.Errorf("trees, the one in force first (-want +got):\n%s", diff)
	}
	wantMine := TreeView{
		Tree: "team/mine", Generation: 3, ObservedGeneration: 3,
		Conditions: []Condition{
			{Type: "Active", Status: "False", Reason: "NotInKubeSystem", Message: "only an ElasticQuotaTree in kube-system is in force; this one is ignored"},
			{Type: "Valid", Status: "True", Reason: "Valid", Message: "the tree satisfies every rule"},
		},
		Resources: []string{"cpu"},
		Nodes: []QuotaNode{
			{Name: "root", Depth: 1, Resources: []NodeResource{{Resource: "cpu", Min: "1", Max: "1"}}},
			{Name: "leaf", Parent: "root", Depth: 2, Namespaces: []string{"team"}, Resources: []NodeResource{{Resource: "cpu", Min: "0", Max: "1"}}},
		},
	}
	if diff := cmp.Diff(wantMine, r.Trees[2]); diff != "" {
		t.Errorf("a tree not in force: spec only (-want +got):\n%s", diff)
	}
	wantBroken := []QuotaNode{
		{Name: "root", Depth: 1, Resources: []NodeResource{{Resource: "cpu", Min: "1", Max: "1"}, {Resource: "memory", Min: "0", Max: Unlimited}}},
		{Name: "leaf", Parent: "root", Depth: 2, Namespaces: []string{"team"}, Resources: []NodeResource{{Resource: "cpu", Min: "2", Max: "1"}, {Resource: "memory", Min: "1Gi", Max: Unlimited}}},
	}
	if diff := cmp.Diff(wantBroken, r.Trees[1].Nodes); diff != "" || len(r.Trees[1].Notes) != 1 {
		t.Errorf("an invalid tree as written, with its problems %q (-want +got):\n%s", r.Trees[1].Notes, diff)
	}
	if got := r.Trees[0]; !got.InForce || got.FiguresFrom != FromStatus || len(got.Nodes) != 7 {
		t.Errorf("tree in force: %+v", got)
	}
	if r := Tree(Snapshot{Trees: treesOf(ignored)}); len(r.Notes) != 1 || r.Notes[0] != "no ElasticQuotaTree in kube-system: no elastic quota is enforced" {
		t.Errorf("notes without a tree in force: %q", r.Notes)
	}
}
