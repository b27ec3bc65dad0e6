package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// clusterCapabilities are Helm's capabilities of localcluster: its version and
// API groups, as `helm install` would discover them.
func chartClusterCapabilities(t *testing.T) *chartutil.Capabilities {
	t.Helper()
	v, err := cluster.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// The in-process API server is not version-stamped (its gitVersion is
	// v0.0.0-master), so the version is rebuilt from major and minor.
	minor := strings.TrimSuffix(v.Minor, "+")
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = chartutil.KubeVersion{Version: fmt.Sprintf("v%s.%s.0", v.Major, minor), Major: v.Major, Minor: minor}
	return &caps
}

// restrictPodSecurity makes ns enforce, warn and audit the restricted Pod
// Security Standard, so that the pods' dry runs are judged by it.
func chartRestrictPodSecurity(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/warn":"restricted","pod-security.kubernetes.io/audit":"restricted"}}}`)
	if _, err := cluster.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// monitoringCRDs are minimal stand-ins for the Prometheus Operator's
// ServiceMonitor and PrometheusRule CRDs (the real ones are not in this
// repository): the group, version, kinds and scope are the real ones; the
// schema accepts any spec. They make the dry runs of the chart's monitoring
// objects reach the API server; the objects' contents are checked by
// checkMonitoring instead.
func chartMonitoringCRDs() []*apiextensionsv1.CustomResourceDefinition {
	crd := func(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
						},
					}},
				}},
			},
		}
	}
	return []*apiextensionsv1.CustomResourceDefinition{crd("servicemonitors", "ServiceMonitor"), crd("prometheusrules", "PrometheusRule")}
}

func chartInstallMonitoringCRDs(t *testing.T, ctx context.Context) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range chartMonitoringCRDs() {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			continue // someone else's; leave it
		case err != nil:
			t.Fatal(err)
		}
		name := crd.Name
		t.Cleanup(func() {
			_ = client.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	// Established, and served by discovery.
	waitFor(t, ctx, "the monitoring CRDs to be served", func(ctx context.Context) error {
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Client.Discovery()))
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			if _, err := mapper.RESTMapping(schema.GroupKind{Group: "monitoring.coreos.com", Kind: kind}, "v1"); err != nil {
				return err
			}
		}
		return nil
	})
}

// chartWarningClient is a dynamic client whose API server warnings are kept.
type chartWarningClient struct {
	client *chartApplier
	rec    *chartWarningRecorder
}

func (w *chartWarningClient) warnings() []string { return w.rec.list() }

type chartWarningRecorder struct{ msgs []string }

func (r *chartWarningRecorder) HandleWarningHeader(code int, agent, text string) {
	r.msgs = append(r.msgs, text)
}

func (r *chartWarningRecorder) list() []string { return r.msgs }

func chartWarningRecordingClient(t *testing.T) *chartWarningClient {
	t.Helper()
	rec := &chartWarningRecorder{}
	cfg := restclient.CopyConfig(cluster.Config)
	cfg.WarningHandler = rec
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Client.Discovery()))
	return &chartWarningClient{client: &chartApplier{dyn: dyn, mapper: mapper}, rec: rec}
}

type chartApplier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// dryRunApply server-side applies obj with dryRun=All: admission, validation
// and field ownership run, nothing is stored.
func chartDryRunApply(ctx context.Context, a *chartApplier, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: mapping %s: %w", chartObjectKey(obj), gvk, err)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: chartFieldOwner}
	var res dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s: a namespaced object without a namespace", chartObjectKey(obj))
		}
		res = a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	} else if obj.GetNamespace() != "" {
		return fmt.Errorf("%s: a cluster-scoped object with a namespace", chartObjectKey(obj))
	}
	if _, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts); err != nil {
		return fmt.Errorf("%s: dry-run apply: %w", chartObjectKey(obj), err)
	}
	return nil
}
