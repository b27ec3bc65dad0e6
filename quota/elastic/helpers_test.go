package elastic

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

type spec = schedulingv1beta1.ElasticQuotaSpec

var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// list builds a ResourceList from name/quantity pairs.
func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func cpu(amount string) corev1.ResourceList { return list("cpu", amount) }

func treeOf(root spec) *schedulingv1beta1.ElasticQuotaTree {
	t := &schedulingv1beta1.ElasticQuotaTree{Spec: schedulingv1beta1.ElasticQuotaTreeSpec{Root: root}}
	t.Namespace, t.Name = schedulingv1beta1.EnforcedNamespace, "eqt"
	return t
}

func mustBuild(t testing.TB, tree *schedulingv1beta1.ElasticQuotaTree) *Tree {
	t.Helper()
	built, err := Build(tree)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return built
}

// seedTree is the ElasticQuotaTree of the capacity scheduling product
// document (shared/scenarios/elastic-quota-tree/tree.yaml).
func seedTree(t testing.TB) *schedulingv1beta1.ElasticQuotaTree {
	t.Helper()
	data, err := os.ReadFile("testdata/seed-tree.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree schedulingv1beta1.ElasticQuotaTree
	if err := yaml.UnmarshalStrict(data, &tree); err != nil {
		t.Fatal(err)
	}
	return &tree
}

// flatTree is a root with min = max = capacity over flat leaves, each named
// after its namespace.
func flatTree(resourceName, capacity string, leaves ...[3]string) *schedulingv1beta1.ElasticQuotaTree {
	root := spec{Name: "root", Min: list(resourceName, capacity), Max: list(resourceName, capacity)}
	for _, leaf := range leaves {
		root.Children = append(root.Children, spec{
			Name: leaf[0], Namespaces: []string{leaf[0]},
			Min: list(resourceName, leaf[1]), Max: list(resourceName, leaf[2]),
		})
	}
	return treeOf(root)
}

func pod(uid, namespace string, requests corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: requests},
	}}}}
	p.UID, p.Namespace, p.Name = types.UID(uid), namespace, uid
	return p
}
