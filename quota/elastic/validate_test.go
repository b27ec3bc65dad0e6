package elastic

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// validBase is a small valid tree each case breaks in one way.
func validBase() spec {
	return spec{
		Name: "root", Min: cpu("10"), Max: cpu("10"),
		Children: []spec{
			{Name: "a", Namespaces: []string{"ns-a"}, Min: cpu("4"), Max: cpu("6")},
			{Name: "b", Namespaces: []string{"ns-b"}, Min: cpu("4"), Max: cpu("6")},
		},
	}
}

func chain(depth int) spec {
	n := spec{Name: fmt.Sprintf("n%d", depth), Namespaces: []string{"deep"}}
	for d := depth - 1; d >= 1; d-- {
		n = spec{Name: fmt.Sprintf("n%d", d), Children: []spec{n}}
	}
	return n
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(root *spec)
		want   []Problem
	}{
		{
			name:   "min exceeds max",
			break_: func(r *spec) { r.Children[0].Min = cpu("7"); r.Children[1].Min = cpu("3") },
			want:   []Problem{{Node: "a", Rule: RuleMinExceedsMax, Message: `quota node "a": min cpu 7 exceeds max cpu 6`}},
		},
		{
			name:   "children's min exceed parent's min",
			break_: func(r *spec) { r.Children[0].Min = cpu("6"); r.Children[1].Min = cpu("5") },
			want: []Problem{{Node: "root", Rule: RuleChildrenMinExceedMin,
				Message: `quota node "root": sum of children's min cpu 11 exceeds min cpu 10`}},
		},
		{
			name: "children's min on a resource the parent's min lacks",
			break_: func(r *spec) {
				r.Children[0].Children = []spec{{Name: "a.1", Namespaces: []string{"ns-a"}, Min: list("memory", "1Gi")}}
				r.Children[0].Namespaces = nil
			},
			want: []Problem{{Node: "a", Rule: RuleChildrenMinExceedMin,
				Message: `quota node "a": sum of children's min memory 1Gi exceeds min memory 0`}},
		},
		{
			name:   "root min differs from max",
			break_: func(r *spec) { r.Max = cpu("12") },
			want:   []Problem{{Node: "root", Rule: RuleRootMinNotMax, Message: `quota node "root": root min cpu 10 differs from max cpu 12`}},
		},
		{
			name:   "root min on a resource max lacks",
			break_: func(r *spec) { r.Min = list("cpu", "10", "memory", "1Gi") },
			want: []Problem{{Node: "root", Rule: RuleRootMinNotMax,
				Message: `quota node "root": root min memory 1Gi differs from max memory unlimited`}},
		},
		{
			name:   "root max on a resource min lacks",
			break_: func(r *spec) { r.Max = list("cpu", "10", "memory", "1Gi") },
			want: []Problem{{Node: "root", Rule: RuleRootMinNotMax,
				Message: `quota node "root": root min memory 0 differs from max memory 1Gi`}},
		},
		{
			name: "a device class is held to min <= max like cpu",
			break_: func(r *spec) {
				r.Children[0].Min = list("cpu", "4", "gpu.example.com.deviceclass.resource.k8s.io/devices", "3")
				r.Children[0].Max = list("cpu", "6", "gpu.example.com.deviceclass.resource.k8s.io/devices", "2")
			},
			want: []Problem{
				{Node: "a", Rule: RuleMinExceedsMax, Message: `quota node "a": min gpu.example.com.deviceclass.resource.k8s.io/devices 3 exceeds max gpu.example.com.deviceclass.resource.k8s.io/devices 2`},
				{Node: "root", Rule: RuleChildrenMinExceedMin, Message: `quota node "root": sum of children's min gpu.example.com.deviceclass.resource.k8s.io/devices 3 exceeds min gpu.example.com.deviceclass.resource.k8s.io/devices 0`},
			},
		},
		{
			name: "a device-class name whose class cannot exist",
			break_: func(r *spec) {
				r.Children[1].Max = list("cpu", "6", "GPU_A.deviceclass.resource.k8s.io/devices", "2", ".deviceclass.resource.k8s.io/devices", "1")
			},
			want: []Problem{
				{Node: "b", Rule: RuleInvalidDeviceClass, Message: `quota node "b": max .deviceclass.resource.k8s.io/devices names device class "", which is not a valid DeviceClass name (a lowercase DNS subdomain)`},
				{Node: "b", Rule: RuleInvalidDeviceClass, Message: `quota node "b": max GPU_A.deviceclass.resource.k8s.io/devices names device class "GPU_A", which is not a valid DeviceClass name (a lowercase DNS subdomain)`},
			},
		},
		{
			name:   "namespace in two leaves",
			break_: func(r *spec) { r.Children[1].Namespaces = []string{"ns-b", "ns-a"} },
			want: []Problem{{Rule: RuleNamespaceInManyNodes,
				Message: `namespace "ns-a" is listed by more than one quota node: "a", "b"`}},
		},
		{
			name:   "namespace twice in one leaf",
			break_: func(r *spec) { r.Children[0].Namespaces = []string{"ns-a", "ns-a"} },
			want:   []Problem{{Node: "a", Rule: RuleNamespaceRepeated, Message: `quota node "a": namespace "ns-a" is listed more than once`}},
		},
		{
			name:   "namespaces on an inner node",
			break_: func(r *spec) { r.Namespaces = []string{"x", "w"} },
			want: []Problem{{Node: "root", Rule: RuleNamespacesOnInnerNode,
				Message: `quota node "root": only leaf nodes may list namespaces, found: w, x`}},
		},
		{
			name: "two nodes with one name",
			break_: func(r *spec) {
				r.Children[0].Children = []spec{{Name: "b", Namespaces: []string{"ns-a"}}}
				r.Children[0].Namespaces = nil
			},
			want: []Problem{{Node: "b", Rule: RuleDuplicateName, Message: `quota node "b": name is used by 2 nodes: root/a/b, root/b`}},
		},
		{
			name:   "empty name",
			break_: func(r *spec) { r.Children[0].Name = "" },
			want:   []Problem{{Node: "root/#0", Rule: RuleEmptyName, Message: `quota node at "root/#0": name must not be empty`}},
		},
		{
			name:   "negative quantities",
			break_: func(r *spec) { r.Children[0].Min = cpu("-1"); r.Children[1].Max = list("cpu", "6", "memory", "-1Gi") },
			want: []Problem{
				{Node: "a", Rule: RuleNegativeQuantity, Message: `quota node "a": min cpu -1 is negative`},
				{Node: "b", Rule: RuleNegativeQuantity, Message: `quota node "b": max memory -1Gi is negative`},
			},
		},
		{
			name: "too deep",
			// n1 hangs off the root at depth 2, so n8 is at depth 9.
			break_: func(r *spec) { r.Children = []spec{chain(schedulingv1beta1.MaxDepth)} },
			want: []Problem{{Node: "n8", Rule: RuleTooDeep,
				Message: `quota node "n8": depth 9 exceeds the maximum depth 8`}},
		},
		{
			name: "invalid resource flavor",
			break_: func(r *spec) {
				r.Children[0].Attributes = map[string]string{schedulingv1beta1.AttributeResourceFlavors: "Spot_Nodes"}
			},
			want: []Problem{{Node: "a", Rule: RuleInvalidResourceFlavor,
				Message: `quota node "a": resourceflavors attribute "Spot_Nodes" is not a valid ResourceFlavor name (lowercase RFC 1123 subdomain)`}},
		},
		{
			name:   "invalid namespace",
			break_: func(r *spec) { r.Children[0].Namespaces = []string{"Bad_NS"} },
			want: []Problem{{Node: "a", Rule: RuleInvalidNamespace,
				Message: `quota node "a": namespace "Bad_NS" is not a valid namespace name (lowercase RFC 1123 label)`}},
		},
		{
			// Exact Quantity comparison of these takes minutes; validation
			// must stay on saturated integers.
			name: "absurd quantities",
			break_: func(r *spec) {
				r.Children[0].Min = cpu("1e99999999")
				r.Children[0].Max = cpu("1")
			},
			want: []Problem{
				{Node: "a", Rule: RuleMinExceedsMax, Message: `quota node "a": min cpu 1e99999999 exceeds max cpu 1`},
				{Node: "root", Rule: RuleChildrenMinExceedMin, Message: `quota node "root": sum of children's min cpu unlimited exceeds min cpu 10`},
			},
		},
		{
			name: "every problem at once, sorted by message",
			break_: func(r *spec) {
				r.Max = cpu("11")
				r.Namespaces = []string{"ns-a"}
				r.Children[0].Min = cpu("8")
				r.Children[1].Name = "a"
			},
			want: []Problem{
				{Rule: RuleNamespaceInManyNodes, Message: `namespace "ns-a" is listed by more than one quota node: "root", "a"`},
				{Node: "a", Rule: RuleMinExceedsMax, Message: `quota node "a": min cpu 8 exceeds max cpu 6`},
				{Node: "a", Rule: RuleDuplicateName, Message: `quota node "a": name is used by 2 nodes: root/a, root/a`},
				{Node: "root", Rule: RuleNamespacesOnInnerNode, Message: `quota node "root": only leaf nodes may list namespaces, found: ns-a`},
				{Node: "root", Rule: RuleRootMinNotMax, Message: `quota node "root": root min cpu 10 differs from max cpu 11`},
				{Node: "root", Rule: RuleChildrenMinExceedMin, Message: `quota node "root": sum of children's min cpu 12 exceeds min cpu 10`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := validBase()
			tt.break_(&root)
			built, err := Build(treeOf(root))
			if built != nil {
				t.Fatal("Build returned a tree for an invalid spec")
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Build error %v is not a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, verr.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidationErrorText(t *testing.T) {
	root := validBase()
	root.Max = cpu("12")
	root.Children[0].Min = cpu("7")
	root.Children[0].Max = cpu("6")
	_, err := Build(treeOf(root))
	wantMessage := `quota node "a": min cpu 7 exceeds max cpu 6; quota node "root": root min cpu 10 differs from max cpu 12; ` +
		`quota node "root": sum of children's min cpu 11 exceeds min cpu 10`
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	if got := verr.Message(); got != wantMessage {
		t.Errorf("Message() =\n%s\nwant\n%s", got, wantMessage)
	}
	wantError := "build ElasticQuotaTree kube-system/eqt: ElasticQuotaTree kube-system/eqt is invalid: " + wantMessage
	if got := err.Error(); got != wantError {
		t.Errorf("Error() =\n%s\nwant\n%s", got, wantError)
	}
}

func TestBuildNil(t *testing.T) {
	if _, err := Build(nil); err == nil || err.Error() != "build ElasticQuotaTree: tree is nil" {
		t.Errorf("Build(nil) error = %v", err)
	}
}

func TestBuildAcceptsDeepestAllowedTree(t *testing.T) {
	tree := mustBuild(t, treeOf(chain(schedulingv1beta1.MaxDepth)))
	leaf, ok := tree.LeafFor("deep")
	if !ok || leaf.Depth() != schedulingv1beta1.MaxDepth || leaf.Path() != "n1/n2/n3/n4/n5/n6/n7/n8" {
		t.Errorf("LeafFor(deep) = %v depth %d path %q", ok, leaf.Depth(), leaf.Path())
	}
}
