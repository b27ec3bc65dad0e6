package elastic

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// TestBadInputTable is the reviewable list of trees the library refuses, written
// as people write them (YAML, as kubectl would send it), with the exact text of
// the Valid condition the scheduler writes (ValidationError.Message) and the
// rules it names. TestBuildRejects breaks one valid tree per rule; these cases
// take other angles on the same rules (other resources and units, inner rather
// than root nodes, unnamed paths, several holders), so each rule is pinned by
// more than one message shape. Trees the API server itself refuses are in
// test/e2e/badinput_test.go.
func TestBadInputTable(t *testing.T) {
	tests := []struct {
		name    string
		tree    string
		rules   []Rule
		message string
	}{
		{
			name: "min above max on memory, units differ",
			tree: `
root: {name: root, min: {memory: 8Gi}, max: {memory: 8Gi}, children: [
  {name: a, namespaces: [ns-a], min: {memory: 2Gi}, max: {memory: 1500Mi}}]}`,
			rules:   []Rule{RuleMinExceedsMax},
			message: `quota node "a": min memory 2Gi exceeds max memory 1500Mi`,
		},
		{
			// The parent is an inner node, not the root: the rule holds at every level.
			name: "grandchildren's min above an inner node's min",
			tree: `
root: {name: root, min: {cpu: 10}, max: {cpu: 10}, children: [
  {name: team, min: {cpu: 4}, children: [
    {name: team.x, namespaces: [x], min: {cpu: 3}},
    {name: team.y, namespaces: [y], min: {cpu: 1500m}}]}]}`,
			rules:   []Rule{RuleChildrenMinExceedMin},
			message: `quota node "team": sum of children's min cpu 4500m exceeds min cpu 4`,
		},
		{
			name: "root max names a resource its min lacks",
			tree: `
root: {name: root, min: {cpu: 4}, max: {cpu: 4, nvidia.com/gpu: 2}, children: [{name: a, namespaces: [a]}]}`,
			rules:   []Rule{RuleRootMinNotMax},
			message: `quota node "root": root min nvidia.com/gpu 0 differs from max nvidia.com/gpu 2`,
		},
		{
			name: "root min and max equal in value but written differently are fine; differing ones are not",
			tree: `
root: {name: root, min: {cpu: 1000m, memory: 1G}, max: {cpu: "1", memory: 1Gi}, children: [{name: a, namespaces: [a]}]}`,
			rules:   []Rule{RuleRootMinNotMax},
			message: `quota node "root": root min memory 1G differs from max memory 1Gi`,
		},
		{
			name: "namespace in three leaves",
			tree: `
root: {name: root, children: [
  {name: a, namespaces: [shared, a]},
  {name: b, namespaces: [shared]},
  {name: c, namespaces: [c, shared]}]}`,
			rules:   []Rule{RuleNamespaceInManyNodes},
			message: `namespace "shared" is listed by more than one quota node: "a", "b", "c"`,
		},
		{
			// Listed twice by one leaf and once by another: one complaint about
			// the two nodes, not a second one about the repeat.
			name: "namespace repeated in a leaf and listed by another",
			tree: `
root: {name: root, children: [{name: a, namespaces: [dup, dup]}, {name: b, namespaces: [dup]}]}`,
			rules:   []Rule{RuleNamespaceInManyNodes},
			message: `namespace "dup" is listed by more than one quota node: "a", "b"`,
		},
		{
			name: "namespaces on an inner node below the root",
			tree: `
root: {name: root, children: [{name: team, namespaces: [team-ns], children: [{name: team.leaf, namespaces: [leaf-ns]}]}]}`,
			rules:   []Rule{RuleNamespacesOnInnerNode},
			message: `quota node "team": only leaf nodes may list namespaces, found: team-ns`,
		},
		{
			name: "one name on three nodes, the root's included",
			tree: `
root: {name: x, children: [{name: x, children: [{name: x, namespaces: [n]}]}]}`,
			rules:   []Rule{RuleDuplicateName},
			message: `quota node "x": name is used by 3 nodes: x, x/x, x/x/x`,
		},
		{
			name:    "unnamed root",
			tree:    `root: {name: "", children: [{name: a, namespaces: [a]}]}`,
			rules:   []Rule{RuleEmptyName},
			message: `quota node at "#0": name must not be empty`,
		},
		{
			// Unnamed nodes are named by their position among siblings, so the
			// author can find them.
			name: "unnamed node under an unnamed node",
			tree: `
root: {name: root, children: [{name: a, namespaces: [a]}, {name: "", children: [{name: "", namespaces: [b]}]}]}`,
			rules:   []Rule{RuleEmptyName, RuleEmptyName},
			message: `quota node at "root/#1": name must not be empty; quota node at "root/#1/#0": name must not be empty`,
		},
		{
			// A negative max is not also "below min": one complaint per cause.
			name: "negative root min and max",
			tree: `
root: {name: root, min: {cpu: "-2"}, max: {cpu: "-2"}, children: [{name: a, namespaces: [a]}]}`,
			rules:   []Rule{RuleNegativeQuantity, RuleNegativeQuantity},
			message: `quota node "root": max cpu -2 is negative; quota node "root": min cpu -2 is negative`,
		},
		{
			name: "negative extended resource in a leaf max",
			tree: `
root: {name: root, children: [{name: a, namespaces: [a], max: {nvidia.com/gpu: "-1"}}]}`,
			rules:   []Rule{RuleNegativeQuantity},
			message: `quota node "a": max nvidia.com/gpu -1 is negative`,
		},
		{
			// Only the first level past the limit is named; its child is too
			// deep by implication.
			name: "ten levels",
			tree: `
root: {name: l1, children: [{name: l2, children: [{name: l3, children: [{name: l4, children: [{name: l5, children: [
  {name: l6, children: [{name: l7, children: [{name: l8, children: [{name: l9, children: [{name: l10, namespaces: [deep]}]}]}]}]}]}]}]}]}]}`,
			rules:   []Rule{RuleTooDeep},
			message: `quota node "l9": depth 9 exceeds the maximum depth 8`,
		},
		{
			name: "resourceflavors with a trailing dash on the root",
			tree: `
root: {name: root, attributes: {resourceflavors: spot-}, children: [{name: a, namespaces: [a]}]}`,
			rules:   []Rule{RuleInvalidResourceFlavor},
			message: `quota node "root": resourceflavors attribute "spot-" is not a valid ResourceFlavor name (lowercase RFC 1123 subdomain)`,
		},
		{
			// An empty value is not "no flavor": the author wrote the key.
			name: "empty resourceflavors",
			tree: `
root: {name: root, children: [{name: a, namespaces: [a], attributes: {resourceflavors: ""}}]}`,
			rules:   []Rule{RuleInvalidResourceFlavor},
			message: `quota node "a": resourceflavors attribute "" is not a valid ResourceFlavor name (lowercase RFC 1123 subdomain)`,
		},
		{
			// Namespaces are labels: a subdomain with dots is not one.
			name: "namespace with a dot",
			tree: `
root: {name: root, children: [{name: a, namespaces: [team.a]}]}`,
			rules:   []Rule{RuleInvalidNamespace},
			message: `quota node "a": namespace "team.a" is not a valid namespace name (lowercase RFC 1123 label)`,
		},
		{
			name: "empty namespace",
			tree: `
root: {name: root, children: [{name: a, namespaces: [""]}]}`,
			rules:   []Rule{RuleInvalidNamespace},
			message: `quota node "a": namespace "" is not a valid namespace name (lowercase RFC 1123 label)`,
		},
		{
			// Other attributes are ACK's free-form settings and are not judged.
			name: "several rules on one node, sorted by message",
			tree: `
root: {name: root, min: {cpu: 2}, max: {cpu: 2}, children: [
  {name: a, namespaces: [A], attributes: {other: "Whatever", resourceflavors: Spot}, min: {cpu: 3}, max: {cpu: 1}}]}`,
			rules: []Rule{RuleMinExceedsMax, RuleInvalidNamespace, RuleInvalidResourceFlavor, RuleChildrenMinExceedMin},
			message: `quota node "a": min cpu 3 exceeds max cpu 1; ` +
				`quota node "a": namespace "A" is not a valid namespace name (lowercase RFC 1123 label); ` +
				`quota node "a": resourceflavors attribute "Spot" is not a valid ResourceFlavor name (lowercase RFC 1123 subdomain); ` +
				`quota node "root": sum of children's min cpu 3 exceeds min cpu 2`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &schedulingv1beta1.ElasticQuotaTree{}
			if err := yaml.UnmarshalStrict([]byte(tt.tree), &obj.Spec); err != nil {
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
			if diff := cmp.Diff(tt.rules, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.message, verr.Message()); diff != "" {
				t.Errorf("Valid condition message (-want +got):\n%s", diff)
			}
			if want := "build ElasticQuotaTree kube-system/eqt: ElasticQuotaTree kube-system/eqt is invalid: " + tt.message; err.Error() != want {
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
