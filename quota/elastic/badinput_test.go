package elastic

import (
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// invalidTree is one entry of testdata/invalid-trees.yaml, the reviewable
// list of trees the library refuses, written as people write them (YAML, as
// kubectl would send it), with the exact text of the Valid condition the
// scheduler writes (ValidationError.Message) and the rules it names.
// TestBuildRejects breaks one valid tree per rule; the list takes other angles
// on the same rules (other resources and units, inner rather than root nodes,
// unnamed paths, several holders), so each rule is pinned by more than one
// message shape. test/e2e/badinput_test.go applies the same list to the API
// server, whose refusals carry the same text.
type invalidTree struct {
	Name      string `json:"name"`
	Why       string `json:"why,omitempty"`
	Tree      string `json:"tree"`
	Rules     []Rule `json:"rules"`
	Message   string `json:"message"`
	APIServer string `json:"apiServer,omitempty"`
}

func TestBadInputTable(t *testing.T) {
	raw, err := os.ReadFile("testdata/invalid-trees.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests []invalidTree
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatal("no cases")
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			obj := &schedulingv1beta1.ElasticQuotaTree{}
			if err := yaml.UnmarshalStrict([]byte(tt.Tree), &obj.Spec); err != nil {
				t.Fatalf("test input does not decode: %v", err)
			}
			obj.Namespace, obj.Name = schedulingv1beta1.EnforcedNamespace, "eqt"
			built, err := Build(obj)
			if built != nil {
				t.Fatal("Build returned a tree for an invalid spec")
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Build error %v is not a *ValidationError", err)
			}
			var rules []Rule
			for _, p := range verr.Problems {
				rules = append(rules, p.Rule)
			}
			if diff := cmp.Diff(tt.Rules, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.Message, verr.Message()); diff != "" {
				t.Errorf("Valid condition message (-want +got):\n%s", diff)
			}
			if want := "build ElasticQuotaTree kube-system/eqt: ElasticQuotaTree kube-system/eqt is invalid: " + tt.Message; err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
}

// TestRebuildRefusalKeepsTree: an invalid update changes nothing else. The
// caller keeps the tree it had, with the same figures and the same verdicts.
func TestRebuildRefusalKeepsTree(t *testing.T) {
	tree := mustBuild(t, flatTree("cpu", "10", [3]string{"a", "4", "6"}, [3]string{"b", "4", "6"}))
	tree.AddRequests("p1", "a", cpu("5"))
	before := tree.Status()
	broken := flatTree("cpu", "10", [3]string{"a", "7", "6"}, [3]string{"b", "4", "6"})
	next, err := tree.Rebuild(broken)
	if next != nil || err == nil {
		t.Fatalf("Rebuild of an invalid spec = %v, %v", next, err)
	}
	if diff := cmp.Diff(before, tree.Status(), quantityEqual); diff != "" {
		t.Errorf("status changed by a refused Rebuild (-before +after):\n%s", diff)
	}
	if v := tree.Admit("a", cpu("1")); !v.Admitted() {
		t.Errorf("a 1-cpu pod of a (used 5, max 6) was refused after a refused Rebuild: %s", v.Message())
	}
	if v := tree.Admit("a", cpu("2")); v.Admitted() {
		t.Error("a 2-cpu pod of a (used 5, max 6) was admitted after a refused Rebuild")
	}
}
