package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotascale/quotascale/localcluster"
)

var (
	capacityQuotas    = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Resource: "capacityquotas"}
	elasticQuotaTrees = schema.GroupVersionResource{Group: "scheduling.sigs.k8s.io", Version: "v1beta1", Resource: "elasticquotatrees"}
)

// TestSeedManifestsApplyVerbatim applies the seeds' manifests unchanged and reads
// them back: nothing may be pruned, defaulted or rewritten in spec.
func TestSeedManifestsApplyVerbatim(t *testing.T) {
	ctx := testContext(t)
	for _, path := range []string{
		"elastic-quota-tree/tree.yaml",
		"capacity-quota/quota.yaml",
		"capacity-quota/more-quotas.yaml",
	} {
		t.Run(path, func(t *testing.T) {
			manifests := readTestdata(t, path)
			want, err := localcluster.DecodeManifests(manifests)
			if err != nil {
				t.Fatal(err)
			}
			apply(t, ctx, manifests)
			for _, w := range want {
				gvr := capacityQuotas
				if w.GetKind() == "ElasticQuotaTree" {
					gvr = elasticQuotaTrees
				}
				var got *unstructured.Unstructured
				if w.GetNamespace() != "" {
					got, err = cluster.Dynamic.Resource(gvr).Namespace(w.GetNamespace()).Get(ctx, w.GetName(), metav1.GetOptions{})
				} else {
					got, err = cluster.Dynamic.Resource(gvr).Get(ctx, w.GetName(), metav1.GetOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_ = cluster.Dynamic.Resource(gvr).Namespace(w.GetNamespace()).Delete(context.Background(), w.GetName(), metav1.DeleteOptions{})
				})
				if diff := cmp.Diff(normalized(t, w.Object)["spec"], normalized(t, got.Object)["spec"]); diff != "" {
					t.Errorf("%s %s spec changed on the way through the API server (-applied +stored):\n%s", w.GetKind(), w.GetName(), diff)
				}
			}
		})
	}
}

// TestCapacityQuotaLimitsValidation shows the API server refusing what upstream's
// schema refuses, each with its message.
func TestCapacityQuotaLimitsValidation(t *testing.T) {
	ctx := testContext(t)
	// Values are sent as a user types them in YAML: Quantity would canonicalise
	// "1000m" to "1" before the server sees it.
	manyResources := map[string]any{}
	for i := 0; i < 21; i++ {
		manyResources[fmt.Sprintf("example.com/r%02d", i)] = "1"
	}
	for _, tc := range []struct {
		name    string
		limits  map[string]any
		wantErr string
	}{
		{"milli cpu", map[string]any{"cpu": "500m"}, "All resource quantities must be non-negative integers."},
		{"milli that is an integer", map[string]any{"cpu": "1000m"}, "All resource quantities must be non-negative integers."},
		{"fractional binary", map[string]any{"memory": "3.67Gi"}, "All resource quantities must be non-negative integers."},
		{"negative integer", map[string]any{"cpu": -1}, "All resource quantities must be non-negative integers."},
		{"negative string", map[string]any{"cpu": "-1"}, "All resource quantities must be non-negative integers."},
		{"21 resources", manyResources, "spec.limits.resources: Too many: 21: must have at most 20 items"},
		{"64-character name", map[string]any{"example.com/" + strings.Repeat("x", 52): "1"}, "Resource names must be 63 characters or less."},
		{"accepted: integers with units", map[string]any{"cpu": "2k", "memory": "32Gi", "nodes": 10, "nvidia.com/gpu": 16}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cq := map[string]any{
				"apiVersion": "autoscaling.x-k8s.io/v1beta1",
				"kind":       "CapacityQuota",
				"metadata":   map[string]any{"name": "validation-" + strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ":", "")},
				"spec":       map[string]any{"limits": map[string]any{"resources": tc.limits}},
			}
			_, err := cluster.Dynamic.Resource(capacityQuotas).Create(ctx, &unstructured.Unstructured{Object: cq}, metav1.CreateOptions{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				_ = cluster.Dynamic.Resource(capacityQuotas).Delete(ctx, cq["metadata"].(map[string]any)["name"].(string), metav1.DeleteOptions{})
				return
			}
			if err == nil {
				t.Fatalf("want refused with %q, got accepted", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}

// TestElasticQuotaTreeDepthLimit shows the unrolled schema's clear refusal past
// MaxDepth levels.
func TestElasticQuotaTreeDepthLimit(t *testing.T) {
	ctx := testContext(t)
	node := map[string]any{"name": "n9", "namespaces": []any{"depth"}}
	for depth := 8; depth >= 1; depth-- {
		node = map[string]any{"name": fmt.Sprintf("n%d", depth), "children": []any{node}}
	}
	tree := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.sigs.k8s.io/v1beta1",
		"kind":       "ElasticQuotaTree",
		"metadata":   map[string]any{"name": "too-deep", "namespace": "default"},
		"spec":       map[string]any{"root": node},
	}}
	_, err := cluster.Dynamic.Resource(elasticQuotaTrees).Namespace("default").Create(ctx, tree, metav1.CreateOptions{})
	want := "quota nodes may nest at most 8 levels deep; a node at depth 8 cannot have children"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want refusal containing %q, got %v", want, err)
	}
}

// TestDeploymentRunsOnKwokNodes proves the control plane works end to end: the
// deployment and replica set controllers create pods, the scheduler binds them and
// kwok runs them.
func TestDeploymentRunsOnKwokNodes(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	shape := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	createNodes(t, ctx,
		localcluster.NodeSpec{Name: "foundation-1", Capacity: shape},
		localcluster.NodeSpec{Name: "foundation-2", Capacity: shape},
	)
	createDeployment(t, ctx, ns, "foundation", 3, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	waitFor(t, ctx, "3 running pods", func(ctx context.Context) error {
		phases, err := podPhases(ctx, ns, labels.SelectorFromSet(map[string]string{"app": "foundation"}))
		if err != nil {
			return err
		}
		if phases[corev1.PodRunning] != 3 {
			return errorf("phases %v", phases)
		}
		return nil
	})
}

// TestKubeconfigServesTables reads the objects through the written kubeconfig and
// asks for the server-side tables `kubectl get` prints, printer columns included.
func TestKubeconfigServesTables(t *testing.T) {
	ctx := testContext(t)
	apply(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	apply(t, ctx, readTestdata(t, "elastic-quota-tree/tree.yaml"))
	t.Cleanup(func() {
		_ = cluster.Dynamic.Resource(capacityQuotas).Delete(context.Background(), "test-capacityquota", metav1.DeleteOptions{})
		_ = cluster.Dynamic.Resource(elasticQuotaTrees).Namespace("kube-system").Delete(context.Background(), "elasticquotatree", metav1.DeleteOptions{})
	})
	config, err := clientcmd.BuildConfigFromFlags("", cluster.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path        string
		wantColumns []string
		wantRow     string
	}{
		{"/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas", []string{"Name", "Valid", "CPU Used", "CPU Limit", "Memory Used", "Memory Limit", "Message", "Age"}, "test-capacityquota"},
		{"/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees", []string{"Name", "Valid", "Active", "Age"}, "elasticquotatree"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			table, err := localcluster.GetTable(ctx, config, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var columns []string
			for _, c := range table.ColumnDefinitions {
				columns = append(columns, c.Name)
			}
			if diff := cmp.Diff(tc.wantColumns, columns); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			found := false
			for _, r := range table.Rows {
				if len(r.Cells) > 0 && r.Cells[0] == tc.wantRow {
					found = true
				}
			}
			if !found {
				t.Errorf("no row named %s in %v", tc.wantRow, table.Rows)
			}
		})
	}
}
