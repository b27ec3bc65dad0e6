package codegen

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// Loading ./apis/... takes seconds, so every check shares one generation.
func TestGenerate(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}

	// Fails when an API type changed without `make generate`.
	t.Run("committed files are fresh", func(t *testing.T) {
		paths := make([]string, 0, len(files))
		for p := range files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		want := []string{
			"apis/autoscaling/v1beta1/zz_generated.deepcopy.go",
			"apis/crds/autoscaling.x-k8s.io_capacityquotas.yaml",
			"apis/crds/kueue.x-k8s.io_resourceflavors.yaml",
			"apis/crds/scheduling.sigs.k8s.io_elasticquotatrees.yaml",
			"apis/kueue/v1beta1/zz_generated.deepcopy.go",
			"apis/scheduling/v1beta1/zz_generated.deepcopy.go",
		}
		if diff := cmp.Diff(want, paths); diff != "" {
			t.Fatalf("generated file set changed (-want +got):\n%s", diff)
		}
		for _, p := range paths {
			onDisk, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				t.Errorf("%s: %v; run make generate", p, err)
				continue
			}
			if diff := cmp.Diff(string(onDisk), string(files[p])); diff != "" {
				t.Errorf("%s is stale; run make generate (-committed +generated):\n%s", p, diff)
			}
		}
	})

	t.Run("tree schema is unrolled to MaxDepth", func(t *testing.T) {
		var crd map[string]any
		if err := yaml.Unmarshal(files["apis/crds/scheduling.sigs.k8s.io_elasticquotatrees.yaml"], &crd); err != nil {
			t.Fatal(err)
		}
		node := lookup(crd["spec"].(map[string]any)["versions"].([]any)[0],
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "root")
		for depth := 1; depth < schedulingv1beta1.MaxDepth; depth++ {
			if lookup(node, "properties", "min") == nil || lookup(node, "properties", "max") == nil {
				t.Fatalf("depth %d: quota node schema lacks min/max: %v", depth, node)
			}
			node = lookup(node, "properties", "children", "items")
		}
		children := lookup(node, "properties", "children").(map[string]any)
		rules, _ := children["x-kubernetes-validations"].([]any)
		want := []any{map[string]any{
			"rule":    "size(self) == 0",
			"message": "quota nodes may nest at most 8 levels deep; a node at depth 8 cannot have children",
		}}
		if diff := cmp.Diff(want, rules); diff != "" {
			t.Errorf("deepest children validation (-want +got):\n%s", diff)
		}
	})

	// Conversion strategy None is only lossless while both versions share
	// one schema; the API server refuses a CRD with two storage versions.
	t.Run("CapacityQuota v1alpha1 is served as v1beta1", func(t *testing.T) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(files["apis/crds/autoscaling.x-k8s.io_capacityquotas.yaml"], &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
			t.Errorf("conversion %+v, want None", crd.Spec.Conversion)
		}
		byName := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
		var names []string
		for _, v := range crd.Spec.Versions {
			byName[v.Name] = v
			names = append(names, v.Name)
		}
		if diff := cmp.Diff([]string{"v1alpha1", "v1beta1"}, names); diff != "" {
			t.Fatalf("versions (-want +got):\n%s", diff)
		}
		alpha, beta := byName["v1alpha1"], byName["v1beta1"]
		if !alpha.Served || alpha.Storage || !alpha.Deprecated || alpha.DeprecationWarning != nil {
			t.Errorf("v1alpha1 served %t storage %t deprecated %t warning %v, want served, not stored, deprecated with the default warning",
				alpha.Served, alpha.Storage, alpha.Deprecated, alpha.DeprecationWarning)
		}
		if !beta.Served || !beta.Storage || beta.Deprecated {
			t.Errorf("v1beta1 served %t storage %t deprecated %t, want served, stored, current", beta.Served, beta.Storage, beta.Deprecated)
		}
		alpha.Name, alpha.Storage, alpha.Deprecated = beta.Name, beta.Storage, beta.Deprecated
		if diff := cmp.Diff(beta, alpha); diff != "" {
			t.Errorf("v1alpha1 differs from v1beta1 beyond name, storage and deprecation (-v1beta1 +v1alpha1):\n%s", diff)
		}
	})
}

func TestMaxDepthMatchesAPI(t *testing.T) {
	if maxDepth != schedulingv1beta1.MaxDepth {
		t.Fatalf("codegen unrolls to %d levels, the API documents %d", maxDepth, schedulingv1beta1.MaxDepth)
	}
}
