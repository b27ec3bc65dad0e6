package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/apis/crds"
)

var capacityQuotasV1alpha1 = capacityQuotas.GroupResource().WithVersion("v1alpha1")

// v1alpha1Deprecated is the API server's default warning on a deprecated
// version, which upstream's CRD relies on too.
const v1alpha1Deprecated = "autoscaling.x-k8s.io/v1alpha1 CapacityQuota is deprecated; use autoscaling.x-k8s.io/v1beta1 CapacityQuota"

// TestCapacityQuotaV1alpha1: a quota written as upstream's v1alpha1 is served
// as v1beta1 and as v1alpha1 alike, warned about, stored as v1beta1, enforced,
// and its status written by the autoscaler with upstream's conditions. A
// field neither version has is refused or dropped, as upstream's CRD does.
func TestCapacityQuotaV1alpha1(t *testing.T) {
	ctx := testContext(t)
	crd := capacityQuotaCRD(t, ctx, cluster.Config)
	if diff := cmp.Diff([]string{"v1beta1"}, crd.Status.StoredVersions); diff != "" {
		t.Errorf("storedVersions of the suite's CRD (-want +got):\n%s", diff)
	}

	warnings := &chartWarningRecorder{}
	alpha := warningDynamic(t, warnings).Resource(capacityQuotasV1alpha1)
	created, err := alpha.Create(ctx, v1alpha1Quota("v1alpha1-nodes", nil), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("creating a v1alpha1 CapacityQuota: %v", err)
	}
	t.Cleanup(func() {
		_ = cluster.Dynamic.Resource(capacityQuotas).Delete(context.Background(), "v1alpha1-nodes", metav1.DeleteOptions{})
	})
	if diff := cmp.Diff([]string{v1alpha1Deprecated}, warnings.list()); diff != "" {
		t.Errorf("warnings on create (-want +got):\n%s", diff)
	}
	for _, gvr := range []struct{ version, apiVersion string }{{"v1beta1", "autoscaling.x-k8s.io/v1beta1"}, {"v1alpha1", "autoscaling.x-k8s.io/v1alpha1"}} {
		got, err := cluster.Dynamic.Resource(capacityQuotas.GroupResource().WithVersion(gvr.version)).Get(ctx, "v1alpha1-nodes", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the quota as %s: %v", gvr.version, err)
		}
		if got.GetAPIVersion() != gvr.apiVersion {
			t.Errorf("read as %s: apiVersion %s", gvr.version, got.GetAPIVersion())
		}
		if diff := cmp.Diff(created.Object["spec"], got.Object["spec"]); diff != "" {
			t.Errorf("spec read as %s (-created +read):\n%s", gvr.version, diff)
		}
	}
	crd = capacityQuotaCRD(t, ctx, cluster.Config)
	if diff := cmp.Diff([]string{"v1beta1"}, crd.Status.StoredVersions); diff != "" {
		t.Errorf("storedVersions after a v1alpha1 create (-want +got):\n%s", diff)
	}

	t.Run("enforced, with upstream's conditions", func(t *testing.T) { v1alpha1QuotaEnforced(t, ctx) })
	t.Run("bad input", func(t *testing.T) { v1alpha1BadInput(t, ctx) })
}

// v1alpha1QuotaEnforced: three 3-cpu pods want three 4-cpu nodes; the
// v1alpha1-nodes quota allows one.
func v1alpha1QuotaEnforced(t *testing.T, ctx context.Context) {
	a := startAutoscaler(t, ctx, `
nodeGroups:
- name: e2e-kwok-v1alpha1
  minSize: 0
  maxSize: 10
  labels: {e2e-v1alpha1: "yes"}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1h
`, nil)
	ns := createNamespace(t, ctx, "")
	createPods(t, ctx, ns, "work", 3, "3", map[string]string{"e2e-v1alpha1": "yes"})
	waitUnschedulable(t, ctx, ns, 3)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-v1alpha1": 1}, a.targets(t)); diff != "" {
		t.Fatalf("targets under a v1alpha1 quota of one node (-want +got):\n%s", diff)
	}
	want := []metav1.Condition{
		{Type: autoscalingv1beta1.ValidCondition, Status: metav1.ConditionTrue, Reason: "ValidationSucceeded", Message: "CapacityQuota is valid", ObservedGeneration: 1},
		{Type: "Reconciled", Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded", Message: "CapacityQuota successfully reconciled", ObservedGeneration: 1},
	}
	waitFor(t, ctx, "the status read as v1alpha1 to carry upstream's conditions", func(ctx context.Context) error {
		u, err := cluster.Dynamic.Resource(capacityQuotasV1alpha1).Get(ctx, "v1alpha1-nodes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		q := &autoscalingv1beta1.CapacityQuota{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, q); err != nil {
			return err
		}
		if diff := cmp.Diff(want, q.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
			return fmt.Errorf("conditions (-want +got):\n%s", diff)
		}
		if used := q.Status.Used; used == nil || q.Status.ObservedGeneration != 1 {
			return fmt.Errorf("status.used %+v observedGeneration %d, want status.used of generation 1", used, q.Status.ObservedGeneration)
		}
		if nodes := q.Status.Used.Resources["nodes"]; !nodes.IsZero() {
			return fmt.Errorf("status.used nodes %s, want 0: none is registered", nodes.String())
		}
		return nil
	})
	q, err := getCapacityQuota(ctx, "v1alpha1-nodes")
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(q.Status.Conditions, "Reconciled"); c == nil || c.LastTransitionTime.IsZero() {
		t.Errorf("Reconciled condition without lastTransitionTime: %+v", c)
	}
}

// v1alpha1BadInput: the two versions share one structural schema, so a
// field v1beta1 does not have is one v1alpha1 does not have either: the API
// server refuses it under strict field validation (kubectl's default) and
// otherwise drops it with a warning, as it does on upstream's CRD; v1beta1's
// rules hold on v1alpha1 too.
func v1alpha1BadInput(t *testing.T, ctx context.Context) {
	for _, tc := range []struct {
		name       string
		extra      map[string]any // merged into spec
		validation string
		wantErr    string
		warnings   []string
	}{
		{
			name: "unknown field, strict", extra: map[string]any{"priority": int64(3)}, validation: metav1.FieldValidationStrict,
			wantErr: `CapacityQuota in version "v1alpha1" cannot be handled as a CapacityQuota: strict decoding error: unknown field "spec.priority"`,
		},
		{
			name: "unknown field, warned and dropped", extra: map[string]any{"priority": int64(3)}, validation: metav1.FieldValidationWarn,
			warnings: []string{v1alpha1Deprecated, `unknown field "spec.priority"`},
		},
		{
			name: "milli quantity", extra: map[string]any{"limits": map[string]any{"resources": map[string]any{"cpu": "500m"}}}, validation: metav1.FieldValidationStrict,
			wantErr: `CapacityQuota.autoscaling.x-k8s.io "v1alpha1-bad" is invalid: spec.limits.resources: Invalid value: All resource quantities must be non-negative integers.`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings := &chartWarningRecorder{}
			obj := v1alpha1Quota("v1alpha1-bad", tc.extra)
			_, err := warningDynamic(t, warnings).Resource(capacityQuotasV1alpha1).Create(ctx, obj, metav1.CreateOptions{FieldValidation: tc.validation})
			if err == nil {
				t.Cleanup(func() {
					_ = cluster.Dynamic.Resource(capacityQuotas).Delete(context.Background(), "v1alpha1-bad", metav1.DeleteOptions{})
				})
			}
			if got := errString(err); got != tc.wantErr {
				t.Fatalf("create: error %q, want %q", got, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.warnings, warnings.list()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			stored, err := cluster.Dynamic.Resource(capacityQuotas).Get(ctx, "v1alpha1-bad", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "priority"); found {
				t.Errorf("the unknown field was kept: %v", stored.Object["spec"])
			}
		})
	}
}

// v1alpha1Quota is a quota of one node on the e2e-v1alpha1=yes nodes, written
// as upstream's v1alpha1, with extra merged into its spec.
func v1alpha1Quota(name string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"e2e-v1alpha1": "yes"}},
		"limits":   map[string]any{"resources": map[string]any{"nodes": int64(1)}},
	}
	for k, v := range extra {
		spec[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.x-k8s.io/v1alpha1",
		"kind":       "CapacityQuota",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

func warningDynamic(t *testing.T, rec *chartWarningRecorder) dynamic.Interface {
	t.Helper()
	cfg := restclient.CopyConfig(cluster.Config)
	cfg.WarningHandler = rec
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// capacityQuotaCRD reads the CapacityQuota CRD of the cluster config reaches.
func capacityQuotaCRD(t *testing.T, ctx context.Context, config *restclient.Config) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "capacityquotas.autoscaling.x-k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// ourCapacityQuotaCRD is the CRD make generate wrote, as the suite installs it.
func ourCapacityQuotaCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	manifests, err := crds.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(m, crd); err != nil {
			t.Fatal(err)
		}
		if crd.Name == "capacityquotas.autoscaling.x-k8s.io" {
			return crd
		}
	}
	t.Fatal("no CapacityQuota CRD among the embedded manifests")
	return nil
}
