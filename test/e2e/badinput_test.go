package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/localcluster"
)

var resourceFlavors = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "resourceflavors"}

const (
	// quantityPattern is the schema's pattern for a Kubernetes quantity.
	quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	// celSkipped is the API server's note, after schema errors, that it did not
	// evaluate the CRD's CEL rules.
	celSkipped = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
)

// TestBadInputRefusedByAPIServer is the reviewable list of objects the CRD
// schemas refuse, each with the API server's exact answer. Quantities and
// numbers are written as a user writes them in YAML. TestCapacityQuotaLimitsValidation
// and TestElasticQuotaTreeDepthLimit cover the limits rules and depth on
// create; these are the other schema rules. Objects the schemas accept but the
// library judges invalid are in quota/*/badinput_test.go and below.
func TestBadInputRefusedByAPIServer(t *testing.T) {
	ctx := testContext(t)
	nineLabels, nineTolerations := "", ""
	for i := range 9 {
		nineLabels += fmt.Sprintf("l%d: v, ", i)
		nineTolerations += "{operator: Exists}, "
	}
	for _, tc := range []struct {
		name     string
		manifest string
		want     string
	}{
		{
			name:     "CapacityQuota without spec",
			manifest: `{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityQuota, metadata: {name: badinput-no-spec}}`,
			want: `CapacityQuota.autoscaling.x-k8s.io "badinput-no-spec" is invalid: [` +
				`spec: Required value, ` + celSkipped + `]`,
		},
		{
			name:     "CapacityQuota without spec.limits",
			manifest: `{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityQuota, metadata: {name: badinput-no-limits}, spec: {selector: {matchLabels: {pool: a}}}}`,
			want: `CapacityQuota.autoscaling.x-k8s.io "badinput-no-limits" is invalid: [` +
				`spec.limits: Required value, ` + celSkipped + `]`,
		},
		{
			name:     "CapacityQuota limits without resources",
			manifest: `{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityQuota, metadata: {name: badinput-no-resources}, spec: {limits: {}}}`,
			want: `CapacityQuota.autoscaling.x-k8s.io "badinput-no-resources" is invalid: [` +
				`spec.limits.resources: Required value, ` + celSkipped + `]`,
		},
		{
			name:     "CapacityQuota limit that is not a quantity",
			manifest: `{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityQuota, metadata: {name: badinput-not-quantity}, spec: {limits: {resources: {cpu: eight}}}}`,
			// The CEL rule runs too and adds a second, less helpful complaint.
			want: `CapacityQuota.autoscaling.x-k8s.io "badinput-not-quantity" is invalid: [` +
				`spec.limits.resources.cpu: Invalid value: "eight": spec.limits.resources.cpu in body should match '` + quantityPattern + `', ` +
				`spec.limits.resources: Invalid value: "object": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: All resource quantities must be non-negative integers.]`,
		},
		{
			name:     "CapacityQuota expression without operator",
			manifest: `{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityQuota, metadata: {name: badinput-no-operator}, spec: {selector: {matchExpressions: [{key: pool, values: [a]}]}, limits: {resources: {cpu: 8}}}}`,
			want: `CapacityQuota.autoscaling.x-k8s.io "badinput-no-operator" is invalid: [` +
				`spec.selector.matchExpressions[0].operator: Required value, ` + celSkipped + `]`,
		},
		{
			name:     "CapacityQuota label value that is a number",
			manifest: `{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityQuota, metadata: {name: badinput-label-number}, spec: {selector: {matchLabels: {generation: 3}}, limits: {resources: {cpu: 8}}}}`,
			want: `CapacityQuota.autoscaling.x-k8s.io "badinput-label-number" is invalid: [` +
				`spec.selector.matchLabels.generation: Invalid value: "integer": spec.selector.matchLabels.generation in body must be of type string: "integer", ` + celSkipped + `]`,
		},
		{
			name:     "ElasticQuotaTree without root",
			manifest: `{apiVersion: scheduling.sigs.k8s.io/v1beta1, kind: ElasticQuotaTree, metadata: {name: badinput-no-root, namespace: default}, spec: {}}`,
			want: `ElasticQuotaTree.scheduling.sigs.k8s.io "badinput-no-root" is invalid: [` +
				`spec.root: Required value, ` + celSkipped + `]`,
		},
		{
			name:     "ElasticQuotaTree root without name",
			manifest: `{apiVersion: scheduling.sigs.k8s.io/v1beta1, kind: ElasticQuotaTree, metadata: {name: badinput-root-name, namespace: default}, spec: {root: {min: {cpu: 1}, max: {cpu: 1}}}}`,
			want: `ElasticQuotaTree.scheduling.sigs.k8s.io "badinput-root-name" is invalid: [` +
				`spec.root.name: Required value, ` + celSkipped + `]`,
		},
		{
			name: "ElasticQuotaTree grandchild without name",
			manifest: `{apiVersion: scheduling.sigs.k8s.io/v1beta1, kind: ElasticQuotaTree, metadata: {name: badinput-child-name, namespace: default},
  spec: {root: {name: root, children: [{name: a, children: [{namespaces: [x]}]}]}}}`,
			want: `ElasticQuotaTree.scheduling.sigs.k8s.io "badinput-child-name" is invalid: [` +
				`spec.root.children[0].children[0].name: Required value, ` + celSkipped + `]`,
		},
		{
			name:     "ElasticQuotaTree max that is not a quantity",
			manifest: `{apiVersion: scheduling.sigs.k8s.io/v1beta1, kind: ElasticQuotaTree, metadata: {name: badinput-max-lots, namespace: default}, spec: {root: {name: root, children: [{name: a, namespaces: [a], max: {cpu: lots}}]}}}`,
			want:     `ElasticQuotaTree.scheduling.sigs.k8s.io "badinput-max-lots" is invalid: spec.root.children[0].max.cpu: Invalid value: "lots": spec.root.children[0].max.cpu in body should match '` + quantityPattern + `'`,
		},
		{
			name:     "ElasticQuotaTree namespaces as one string",
			manifest: `{apiVersion: scheduling.sigs.k8s.io/v1beta1, kind: ElasticQuotaTree, metadata: {name: badinput-namespaces-string, namespace: default}, spec: {root: {name: root, children: [{name: a, namespaces: team-a}]}}}`,
			want: `ElasticQuotaTree.scheduling.sigs.k8s.io "badinput-namespaces-string" is invalid: [` +
				`spec.root.children[0].namespaces: Invalid value: "string": spec.root.children[0].namespaces in body must be of type array: "string", ` + celSkipped + `]`,
		},
		{
			name:     "ResourceFlavor with 9 nodeLabels",
			manifest: `{apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: badinput-nine-labels}, spec: {nodeLabels: {` + nineLabels + `}}}`,
			want:     `ResourceFlavor.kueue.x-k8s.io "badinput-nine-labels" is invalid: spec.nodeLabels: Too many: 9: must have at most 8 items`,
		},
		{
			name:     "ResourceFlavor with 9 tolerations",
			manifest: `{apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: badinput-nine-tolerations}, spec: {tolerations: [` + nineTolerations + `]}}`,
			want:     `ResourceFlavor.kueue.x-k8s.io "badinput-nine-tolerations" is invalid: spec.tolerations: Too many: 9: must have at most 8 items`,
		},
		{
			name:     "ResourceFlavor taint without key",
			manifest: `{apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: badinput-taint-key}, spec: {nodeTaints: [{effect: NoSchedule}]}}`,
			want:     `ResourceFlavor.kueue.x-k8s.io "badinput-taint-key" is invalid: spec.nodeTaints[0].key: Required value`,
		},
		{
			name:     "ResourceFlavor label value that is a boolean",
			manifest: `{apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: badinput-label-bool}, spec: {nodeLabels: {spot: true}}}`,
			want:     `ResourceFlavor.kueue.x-k8s.io "badinput-label-bool" is invalid: spec.nodeLabels.spot: Invalid value: "boolean": spec.nodeLabels.spot in body must be of type string: "boolean"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := localcluster.DecodeManifests([]byte(tc.manifest))
			if err != nil || len(objs) != 1 {
				t.Fatalf("test manifest: %v (%d objects)", err, len(objs))
			}
			obj := objs[0]
			gvr := map[string]schema.GroupVersionResource{
				"CapacityQuota": capacityQuotas, "ElasticQuotaTree": elasticQuotaTrees, "ResourceFlavor": resourceFlavors,
			}[obj.GetKind()]
			client := cluster.Dynamic.Resource(gvr).Namespace(obj.GetNamespace())
			_, err = client.Create(ctx, obj, metav1.CreateOptions{})
			if err == nil {
				_ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
				t.Fatalf("accepted; want %q", tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadInputRefusedTreeUpdateChangesNothing: an update the API server
// refuses (here a max that is not a quantity, then a tree one level too deep)
// changes nothing: the stored tree keeps its resourceVersion and generation,
// and the scheduler still reports that generation in force and valid.
// TestElasticQuotaInvalidUpdateKeepsLastValidTree covers updates the server
// accepts and the library refuses.
func TestBadInputRefusedTreeUpdateChangesNothing(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	tree := applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 8}
    max: {cpu: 8}
    children:
    - {name: team, namespaces: [%s], max: {cpu: 4}}
`, ns)))
	client := cluster.Dynamic.Resource(elasticQuotaTrees).Namespace("kube-system")
	before, err := client.Get(ctx, tree.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deep := map[string]any{"name": "d9", "namespaces": []any{ns}}
	for depth := 8; depth >= 2; depth-- {
		deep = map[string]any{"name": fmt.Sprintf("d%d", depth), "children": []any{deep}}
	}
	for _, tc := range []struct {
		name     string
		children []any
		want     string
	}{
		{
			name:     "max that is not a quantity",
			children: []any{map[string]any{"name": "team", "namespaces": []any{ns}, "max": map[string]any{"cpu": "four"}}},
			want:     `spec.root.children[0].max.cpu: Invalid value: "four"`,
		},
		{
			name:     "nine levels",
			children: []any{deep},
			want:     "quota nodes may nest at most 8 levels deep; a node at depth 8 cannot have children",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			update := before.DeepCopy()
			if err := unstructured.SetNestedSlice(update.Object, tc.children, "spec", "root", "children"); err != nil {
				t.Fatal(err)
			}
			_, err := client.Update(ctx, update, metav1.UpdateOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update: want a refusal containing %q, got %v", tc.want, err)
			}
		})
	}
	after, err := getTree(ctx, "kube-system", tree.Name)
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.GetResourceVersion() || after.Generation != before.GetGeneration() {
		t.Errorf("refused updates changed the stored tree: resourceVersion %s -> %s, generation %d -> %d",
			before.GetResourceVersion(), after.ResourceVersion, before.GetGeneration(), after.Generation)
	}
	type condition struct{ Status, Message string }
	var got []condition
	for _, typ := range []string{schedulingv1beta1.ConditionActive, schedulingv1beta1.ConditionValid} {
		if c := meta.FindStatusCondition(after.Status.Conditions, typ); c != nil {
			got = append(got, condition{string(c.Status), c.Message})
		}
	}
	want := []condition{
		{"True", fmt.Sprintf("generation %d is in force", before.GetGeneration())},
		{"True", "the tree satisfies every rule"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Active, Valid conditions (-want +got):\n%s", diff)
	}
}

// TestBadInputInvalidCapacityQuotaLeavesOthersEnforced: CapacityQuotas the
// API server accepts but whose selector cannot be used (an operator that is not
// a label selector operator, a label key with a space) are reported invalid
// with the exact reason and not enforced, while a valid quota over the same
// nodes still caps the scale-up.
func TestBadInputInvalidCapacityQuotaLeavesOthersEnforced(t *testing.T) {
	ctx := testContext(t)
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: badinput-valid}
spec:
  selector: {matchLabels: {e2e-pool: badinput}}
  limits: {resources: {cpu: 4}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: badinput-operator}
spec:
  selector: {matchExpressions: [{key: e2e-pool, operator: Near, values: [badinput]}]}
  limits: {resources: {cpu: 0}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: badinput-key}
spec:
  selector: {matchLabels: {"e2e pool": badinput}}
  limits: {resources: {cpu: 0}}
`))
	a := startAutoscaler(t, ctx, `
nodeGroups:
- name: e2e-kwok-badinput
  minSize: 0
  maxSize: 10
  labels: {e2e-pool: badinput}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 2s
`, nil)
	ns := createNamespace(t, ctx, "")
	// Four 1.5-cpu pods take two 4-cpu nodes; the valid quota allows one, the
	// invalid ones (cpu: 0) would allow none if they were enforced.
	createPods(t, ctx, ns, "work", 4, "1500m", map[string]string{"e2e-pool": "badinput"})
	waitUnschedulable(t, ctx, ns, 4)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-badinput": 1}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	type condition struct{ Status, Message string }
	want := map[string]condition{
		"badinput-valid":    {"True", "CapacityQuota is valid"},
		"badinput-operator": {"False", `selector is invalid: "Near" is not a valid label selector operator`},
		"badinput-key": {"False", `selector is invalid: key: Invalid value: "e2e pool": name part must consist of alphanumeric characters, '-', '_' or '.', ` +
			`and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
	}
	waitFor(t, ctx, "every quota's valid condition", func(ctx context.Context) error {
		got := map[string]condition{}
		for name := range want {
			q, err := getCapacityQuota(ctx, name)
			if err != nil {
				return err
			}
			if c := meta.FindStatusCondition(q.Status.Conditions, autoscalingv1beta1.ValidCondition); c != nil {
				got[name] = condition{string(c.Status), c.Message}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("valid conditions (-want +got):\n%s", diff)
		}
		return nil
	})
}

// invalidTree is one entry of quota/elastic/testdata/invalid-trees.yaml, the
// library's reviewable list of trees that break a rule.
type invalidTree struct {
	Name      string   `json:"name"`
	Why       string   `json:"why,omitempty"`
	Tree      string   `json:"tree"`
	Rules     []string `json:"rules"`
	Message   string   `json:"message"`
	APIServer string   `json:"apiServer,omitempty"`
}

// TestBadInputInvalidTreesRefusedAtApply applies every tree of the library's
// list of invalid trees, as kubectl apply --server-side would: the API server
// refuses each, through the CRD's CEL rules or the scheduler's admission
// webhook, with the rule's text, and stores nothing.
func TestBadInputInvalidTreesRefusedAtApply(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	var cases []invalidTree
	raw, err := os.ReadFile(filepath.Join("..", "..", "quota", "elastic", "testdata", "invalid-trees.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.Tree), &spec); err != nil {
				t.Fatal(err)
			}
			manifest, err := json.Marshal(map[string]any{
				"apiVersion": "scheduling.sigs.k8s.io/v1beta1", "kind": "ElasticQuotaTree",
				"metadata": map[string]any{"name": "invalid", "namespace": ns},
				"spec":     spec,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cluster.Apply(ctx, manifest)
			if err == nil {
				_ = cluster.Dynamic.Resource(elasticQuotaTrees).Namespace(ns).Delete(context.Background(), "invalid", metav1.DeleteOptions{})
				t.Fatalf("accepted; the library says: %s", tc.Message)
			}
			want := tc.APIServer
			if want == "" {
				want = fmt.Sprintf(`admission webhook "elasticquotatree.quotascale.io" denied the request: ElasticQuotaTree %s/invalid is invalid: %s`, ns, tc.Message)
			}
			if got := apiStatusMessage(err); got != want {
				t.Errorf("refusal\n got %s\nwant %s", got, want)
			}
		})
	}
}
