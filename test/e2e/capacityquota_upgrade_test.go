package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
)

// TestCapacityQuotaUpgradeFromUpstreamV1alpha1 walks docs/migrating-from-upstream.md's
// procedure for quotas that upstream's autoscaler 1.35 or 1.36 stored as
// v1alpha1, on a control plane of its own: the suite's CRD is shared by every
// test and must stay ours. The CRD it starts from has upstream's old shape (only
// v1alpha1, stored); its schema is ours, which does not change how the API
// server treats versions.
func TestCapacityQuotaUpgradeFromUpstreamV1alpha1(t *testing.T) {
	ctx := testContext(t)
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	fresh, err := localcluster.Start(startCtx, localcluster.Options{NoScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fresh.Stop)
	crdClient, err := apiextensionsclient.NewForConfig(fresh.Config)
	if err != nil {
		t.Fatal(err)
	}
	u := &upgrade{crds: crdClient.ApiextensionsV1().CustomResourceDefinitions(), dyn: fresh.Dynamic, ours: ourCapacityQuotaCRD(t)}
	previous := u.onlyVersion("v1alpha1")
	ourPrevious := u.onlyVersion("v1beta1")

	// The cluster as upstream's 1.36 left it: v1alpha1 quotas, with that
	// release's conditions.
	u.deleteCRD(t, ctx)
	if _, err := u.crds.Create(ctx, previous, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatalf("creating upstream's previous CRD: %v", err)
	}
	u.wantStoredVersions(t, ctx, "v1alpha1")
	u.createUpstreamQuota(t, ctx)

	// Quotascale's CRD before it served v1alpha1 is refused: it would strand
	// the stored v1alpha1 objects.
	u.wantRefused(t, ctx, ourPrevious, `status.storedVersions[0]: Invalid value: "v1alpha1": missing from spec.versions`)

	// Upgrade: apply our CRD, then read the quota as either version.
	want := u.get(t, ctx, "v1alpha1")
	if want.Object["status"] == nil {
		t.Fatal("the quota has no status before the upgrade")
	}
	u.apply(t, ctx, u.ours)
	u.wantStoredVersions(t, ctx, "v1alpha1", "v1beta1")
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		got := u.get(t, ctx, version)
		if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
			t.Errorf("spec read as %s after the upgrade (-before +after):\n%s", version, diff)
		}
		if diff := cmp.Diff(want.Object["status"], got.Object["status"]); diff != "" {
			t.Errorf("status read as %s after the upgrade (-before +after):\n%s", version, diff)
		}
	}

	// Migrate storage to v1beta1 and drop v1alpha1 from storedVersions: what
	// a later release that stops serving v1alpha1 will need.
	u.rewrite(t, ctx, "v1beta1")
	u.setStoredVersions(t, ctx, "v1beta1")

	// The way back to a release that knows only v1alpha1: upstream's old CRD
	// is refused until the quotas are stored as v1alpha1 again.
	u.wantRefused(t, ctx, previous, `status.storedVersions[0]: Invalid value: "v1beta1": missing from spec.versions`)
	u.storeAsV1alpha1(t, ctx)
	u.rewrite(t, ctx, "v1alpha1")
	u.setStoredVersions(t, ctx, "v1alpha1")
	u.apply(t, ctx, previous)
	u.wantStoredVersions(t, ctx, "v1alpha1")
	back, err := u.crds.Get(ctx, u.ours.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(previous.Spec.Versions, back.Spec.Versions); diff != "" {
		t.Errorf("versions after the way back (-upstream's previous +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Object["spec"], u.get(t, ctx, "v1alpha1").Object["spec"]); diff != "" {
		t.Errorf("spec after the way back (-before +after):\n%s", diff)
	}
}

// upgrade changes one cluster's CapacityQuota CRD and reads its quota,
// "upgraded".
type upgrade struct {
	crds apiextensionsv1client.CustomResourceDefinitionInterface
	dyn  dynamic.Interface
	ours *apiextensionsv1.CustomResourceDefinition
}

const upgradedQuota = "upgraded"

// onlyVersion is our CRD serving and storing one of its versions, as a
// release that knew only that version did.
func (u *upgrade) onlyVersion(name string) *apiextensionsv1.CustomResourceDefinition {
	crd := u.ours.DeepCopy()
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != name })
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[0].Deprecated = true, false
	return crd
}

func (u *upgrade) deleteCRD(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := u.crds.Delete(ctx, u.ours.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CRD %s: %v", u.ours.Name, err)
	}
	waitFor(t, ctx, "CRD "+u.ours.Name+" to be gone", func(ctx context.Context) error {
		_, err := u.crds.Get(ctx, u.ours.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// apply applies desired as `kubectl apply --server-side --force-conflicts`
// does: the fields other managers set (an earlier client-side apply, a
// patch) are taken over, and those kubectl applied before and desired lacks
// are removed.
func (u *upgrade) apply(t *testing.T, ctx context.Context, desired *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if err := u.applyCRD(ctx, desired); err != nil {
		t.Fatalf("applying CRD %s: %v", desired.Name, err)
	}
}

func (u *upgrade) wantRefused(t *testing.T, ctx context.Context, desired *apiextensionsv1.CustomResourceDefinition, want string) {
	t.Helper()
	err := u.applyCRD(ctx, desired)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("replacing CRD %s: error %v, want Invalid with %q", desired.Name, err, want)
	}
}

func (u *upgrade) applyCRD(ctx context.Context, desired *apiextensionsv1.CustomResourceDefinition) error {
	obj := desired.DeepCopy()
	obj.APIVersion, obj.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	obj.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = u.crds.Patch(ctx, obj.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)})
	return err
}

// storeAsV1alpha1 moves the CRD's storage version back to v1alpha1 with the
// JSON patch of the guide's way back, read from the guide.
func (u *upgrade) storeAsV1alpha1(t *testing.T, ctx context.Context) {
	t.Helper()
	const command = "kubectl patch crd capacityquotas.autoscaling.x-k8s.io --type=json -p '"
	guide := migrationGuide(t)
	start := strings.Index(guide, command)
	if start < 0 {
		t.Fatalf("the migration guide has no %q", command)
	}
	patch, _, _ := strings.Cut(guide[start+len(command):], "'")
	if _, err := u.crds.Patch(ctx, u.ours.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatalf("moving storage to v1alpha1 with the guide's patch %s: %v", patch, err)
	}
}

func migrationGuide(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "migrating-from-upstream.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (u *upgrade) wantStoredVersions(t *testing.T, ctx context.Context, want ...string) {
	t.Helper()
	crd, err := u.crds.Get(ctx, u.ours.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, crd.Status.StoredVersions); diff != "" {
		t.Fatalf("status.storedVersions (-want +got):\n%s", diff)
	}
}

// setStoredVersions trims status.storedVersions once every object is stored
// in versions, with `kubectl patch crd --subresource=status --type=merge`.
func (u *upgrade) setStoredVersions(t *testing.T, ctx context.Context, versions ...string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"storedVersions": versions}})
	if err != nil {
		t.Fatal(err)
	}
	if guide := migrationGuide(t); !strings.Contains(guide, "-p '"+string(patch)+"'") {
		t.Errorf("the migration guide does not patch storedVersions with %s", patch)
	}
	if _, err := u.crds.Patch(ctx, u.ours.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-patch"}, "status"); err != nil {
		t.Fatalf("setting storedVersions to %v: %v", versions, err)
	}
	u.wantStoredVersions(t, ctx, versions...)
}

// createUpstreamQuota creates a v1alpha1 quota with the status upstream's 1.36
// wrote, once the API server serves the CRD just created.
func (u *upgrade) createUpstreamQuota(t *testing.T, ctx context.Context) {
	t.Helper()
	alpha := u.dyn.Resource(capacityQuotasV1alpha1)
	waitFor(t, ctx, "a v1alpha1 quota created", func(ctx context.Context) error {
		_, err := alpha.Create(ctx, v1alpha1Quota(upgradedQuota, nil), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	q := u.get(t, ctx, "v1alpha1")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339)
	q.Object["status"] = map[string]any{
		"observedGeneration": int64(1),
		"used":               map[string]any{"resources": map[string]any{"nodes": "0"}},
		"conditions": []any{
			map[string]any{"type": "Valid", "status": "True", "reason": "ValidationSucceeded", "message": "CapacityQuota is valid", "observedGeneration": int64(1), "lastTransitionTime": at},
			map[string]any{"type": "Reconciled", "status": "True", "reason": "ReconciliationSucceeded", "message": "CapacityQuota successfully reconciled", "observedGeneration": int64(1), "lastTransitionTime": at},
		},
	}
	if _, err := alpha.UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the status upstream wrote: %v", err)
	}
}

func (u *upgrade) get(t *testing.T, ctx context.Context, version string) *unstructured.Unstructured {
	t.Helper()
	var q *unstructured.Unstructured
	waitFor(t, ctx, "quota "+upgradedQuota+" served as "+version, func(ctx context.Context) error {
		var err error
		q, err = u.dyn.Resource(capacityQuotas.GroupResource().WithVersion(version)).Get(ctx, upgradedQuota, metav1.GetOptions{})
		return err
	})
	return q
}

// rewrite stores the quota again in version, the CRD's storage version, as
// `kubectl get ... -o json | kubectl replace -f -` does. The API server
// writes an update only when the stored bytes change, so a new
// resourceVersion shows the object was re-encoded, and a second replace,
// changing nothing, must keep it.
func (u *upgrade) rewrite(t *testing.T, ctx context.Context, version string) {
	t.Helper()
	r := u.dyn.Resource(capacityQuotas.GroupResource().WithVersion(version))
	var rewritten string
	waitFor(t, ctx, "quota "+upgradedQuota+" stored as "+version, func(ctx context.Context) error {
		q, err := r.Get(ctx, upgradedQuota, metav1.GetOptions{})
		if err != nil {
			return err
		}
		updated, err := r.Update(ctx, q, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		if updated.GetResourceVersion() == q.GetResourceVersion() {
			return fmt.Errorf("a replace as %s wrote nothing: the API server still stores another version", version)
		}
		rewritten = updated.GetResourceVersion()
		return nil
	})
	q, err := r.Get(ctx, upgradedQuota, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Update(ctx, q, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != rewritten {
		t.Errorf("a second replace as %s wrote again (resourceVersion %s, then %s)", version, rewritten, again.GetResourceVersion())
	}
}
