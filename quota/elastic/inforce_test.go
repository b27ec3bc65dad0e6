package elastic

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

func TestInForce(t *testing.T) {
	tree := func(namespace, name string, age time.Duration) *schedulingv1beta1.ElasticQuotaTree {
		return &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))}}
	}
	older, newer := tree("kube-system", "b", 2*time.Hour), tree("kube-system", "a", time.Hour)
	elsewhere := tree("team", "oldest", 3*time.Hour)
	sameAgeA, sameAgeB := tree("kube-system", "a", time.Hour), tree("kube-system", "b", time.Hour)
	tests := []struct {
		name  string
		trees []*schedulingv1beta1.ElasticQuotaTree
		want  *schedulingv1beta1.ElasticQuotaTree
	}{
		{"none", nil, nil},
		{"only kube-system counts", trees(elsewhere), nil},
		{"the oldest in kube-system", trees(newer, elsewhere, nil, older), older},
		{"same age: by name", trees(sameAgeB, sameAgeA), sameAgeA},
	}
	for _, tt := range tests {
		if got := InForce(tt.trees); got != tt.want {
			t.Errorf("%s: InForce = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func trees(t ...*schedulingv1beta1.ElasticQuotaTree) []*schedulingv1beta1.ElasticQuotaTree { return t }

func TestLastValid(t *testing.T) {
	valid := func(maxCPU string) schedulingv1beta1.ElasticQuotaTreeSpec {
		return schedulingv1beta1.ElasticQuotaTreeSpec{Root: spec{Name: "root", Min: cpu("8"), Max: cpu("8"), Children: []spec{
			{Name: "a", Namespaces: []string{"a"}, Max: cpu(maxCPU)}}}}
	}
	// Two leaves listing one namespace: the library refuses it.
	invalid := schedulingv1beta1.ElasticQuotaTreeSpec{Root: spec{Name: "root", Children: []spec{
		{Name: "a", Namespaces: []string{"a"}}, {Name: "b", Namespaces: []string{"a"}}}}}
	object := func(generation int64, s schedulingv1beta1.ElasticQuotaTreeSpec, lastValid *schedulingv1beta1.TreeGeneration) *schedulingv1beta1.ElasticQuotaTree {
		t := treeOf(s.Root)
		t.UID, t.Generation = "uid-1", generation
		t.Status.LastValid = lastValid
		return t
	}
	gen := func(g int64, s schedulingv1beta1.ElasticQuotaTreeSpec) *schedulingv1beta1.TreeGeneration {
		return &schedulingv1beta1.TreeGeneration{Generation: g, Spec: s}
	}
	type result struct {
		Generation int64
		Current    bool
		MaxA       string // the enforced tree's max cpu of leaf a; empty when nothing is enforced
		SpecErr    bool
	}
	tests := []struct {
		name       string
		obj        *schedulingv1beta1.ElasticQuotaTree
		remembered *schedulingv1beta1.TreeGeneration
		want       result
	}{
		{"a valid spec is enforced", object(3, valid("4"), gen(2, valid("2"))), gen(1, valid("1")), result{3, true, "4", false}},
		{"invalid: status.lastValid", object(3, invalid, gen(2, valid("2"))), nil, result{2, false, "2", true}},
		{"invalid: the caller's memory when newer", object(4, invalid, gen(2, valid("2"))), gen(3, valid("3")), result{3, false, "3", true}},
		{"invalid: status when newer than the memory", object(4, invalid, gen(3, valid("3"))), gen(2, valid("2")), result{3, false, "3", true}},
		{"invalid, never valid: nothing", object(1, invalid, nil), nil, result{SpecErr: true}},
		{"invalid: a recorded generation that does not build is not used", object(3, invalid, gen(2, invalid)), nil, result{SpecErr: true}},
		{"invalid: a recorded generation not older than the spec is not used", object(3, invalid, gen(3, valid("3"))), nil, result{SpecErr: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := LastValid(tt.obj, tt.remembered)
			got := result{Generation: e.Generation, Current: e.Current, SpecErr: err != nil}
			if e.Tree != nil {
				a, _ := e.Tree.Node("a")
				q := a.Max()["cpu"]
				got.MaxA = q.String()
				if e.Spec == nil || e.Tree.Object() != "kube-system/eqt" {
					t.Errorf("Spec %v, Object %q", e.Spec, e.Tree.Object())
				}
			}
			if got != tt.want {
				t.Errorf("LastValid = %+v, want %+v (err %v)", got, tt.want, err)
			}
			var verr *ValidationError
			if err != nil && !errors.As(err, &verr) {
				t.Errorf("error %v does not wrap a ValidationError", err)
			}
		})
	}
}
