package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/localcluster"
)

// apiStatusMessage is the API server's own answer inside a client error.
func apiStatusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// teamTree is a 4-cpu tree whose one leaf, team, lists ns with the given min
// and max.
func teamTree(ns, leafMin, leafMax string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 8}
    max: {cpu: 8}
    children:
    - {name: team, namespaces: [%s], min: {cpu: %s}, max: {cpu: %s}}
`, ns, leafMin, leafMax))
}

// TestElasticQuotaInvalidTreeSurvivesRestarts: the webhook refuses an invalid
// edit at write time. With the webhook down the edit gets in; a scheduler and
// an autoscaler started then, with no memory of the last valid generation,
// still enforce it, from status.lastValid.
func TestElasticQuotaInvalidTreeSurvivesRestarts(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	tree := applyTree(t, ctx, teamTree(ns, "2", "4"))
	waitFor(t, ctx, "the generation in force recorded in status.lastValid", func(ctx context.Context) error {
		got, err := getTree(ctx, tree.Namespace, tree.Name)
		if err != nil {
			return err
		}
		if got.Status.LastValid == nil || got.Status.LastValid.Generation != tree.Generation {
			return fmt.Errorf("status.lastValid %+v, want generation %d", got.Status.LastValid, tree.Generation)
		}
		return nil
	})

	// min 9 > max 8, and more than the root's min: if it were in force, the
	// team would get 8 cpu; with no tree at all, everything.
	invalid := teamTree(ns, "9", "8")
	_, err := cluster.Apply(ctx, invalid)
	want := `admission webhook "elasticquotatree.quotascale.io" denied the request: ElasticQuotaTree kube-system/elasticquotatree is invalid: ` +
		`quota node "root": sum of children's min cpu 9 exceeds min cpu 8; quota node "team": min cpu 9 exceeds max cpu 8`
	if diff := cmp.Diff(want, apiStatusMessage(err)); diff != "" {
		t.Fatalf("applying an invalid edit with the webhook up (-want +got):\n%s", diff)
	}

	cluster.SetWebhookAvailable(false)
	t.Cleanup(func() { cluster.SetWebhookAvailable(true) })
	stored := apply(t, ctx, invalid)[0]
	if stored.GetGeneration() != tree.Generation+1 {
		t.Fatalf("the invalid edit is generation %d, want %d", stored.GetGeneration(), tree.Generation+1)
	}

	cluster.StopScheduler()
	if err := cluster.StartScheduler(ctx, localcluster.SchedulerOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the restarted scheduler keeping the last valid generation", func(ctx context.Context) error {
		got, err := getTree(ctx, tree.Namespace, tree.Name)
		if err != nil {
			return err
		}
		active := meta.FindStatusCondition(got.Status.Conditions, schedulingv1beta1.ConditionActive)
		want := fmt.Sprintf("generation %d is invalid; generation %d stays in force", tree.Generation+1, tree.Generation)
		if got.Status.ObservedGeneration != tree.Generation+1 || active == nil || active.Message != want {
			return fmt.Errorf("status %+v, want Active %q", got.Status.Conditions, want)
		}
		return nil
	})

	// A freshly started autoscaler: six 1-cpu pods on 2-cpu nodes. Under the
	// last valid max of 4 it adds two nodes, not three (no tree) or more.
	a := startAutoscaler(t, ctx, `
nodeGroups:
- name: e2e-kwok-lastvalid
  minSize: 0
  maxSize: 10
  labels: {e2e-pool: lastvalid}
  capacity: {cpu: "2", memory: 8Gi}
  provisioningDelay: 1s
`, nil)
	createPods(t, ctx, ns, "work", 6, "1", map[string]string{"e2e-pool": "lastvalid"})
	waitUnschedulable(t, ctx, ns, 6)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-lastvalid": 2}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	settle(t, ctx, "4 pods running under the last valid max, 2 pending", wantPhases(ns, 4, 2))
}

// TestElasticQuotaResize: an in-place resize (pods/resize) within the leaf's
// max is accepted and charged; one past it is refused at write time, with the
// numbers.
func TestElasticQuotaResize(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "resize-1", Labels: map[string]string{"e2e-node": "resize-1"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}})
	tree := applyTree(t, ctx, teamTree(ns, "0", "4"))
	createPods(t, ctx, ns, "resized", 1, "1", map[string]string{"e2e-node": "resize-1"})
	createPods(t, ctx, ns, "other", 1, "2", map[string]string{"e2e-node": "resize-1"})
	settle(t, ctx, "both pods running", wantPhases(ns, 2, 0))
	reportResources(t, ctx, ns, "resized-0")

	resize := func(cpu string) error {
		pod, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, "resized-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		_, err = cluster.Client.CoreV1().Pods(ns).UpdateResize(ctx, pod.Name, pod, metav1.UpdateOptions{})
		return err
	}
	teamUsed := func(want string) {
		t.Helper()
		waitFor(t, ctx, "team's usage in status at "+want+" cpu", func(ctx context.Context) error {
			got, err := getTree(ctx, tree.Namespace, tree.Name)
			if err != nil {
				return err
			}
			for _, q := range got.Status.Quotas {
				if q.Name == "team" {
					used := q.Used[corev1.ResourceCPU]
					if used.Cmp(resource.MustParse(want)) == 0 {
						return nil
					}
					return fmt.Errorf("team used %s", used.String())
				}
			}
			return fmt.Errorf("no figures for team in %+v", got.Status.Quotas)
		})
	}
	teamUsed("3")
	if err := resize("2"); err != nil {
		t.Fatalf("a resize within max: %v", err)
	}
	teamUsed("4")

	err := resize("3")
	want := fmt.Sprintf(`admission webhook "podresize.quotascale.io" denied the request: resizing pod %s/resized-0 from cpu 2 to cpu 3 adds cpu 1, `+
		`which its quota does not admit: exceeded elastic quota "team": cpu used 4, requested 1, max 4`, ns)
	if diff := cmp.Diff(want, apiStatusMessage(err)); diff != "" {
		t.Fatalf("a resize past max (-want +got):\n%s", diff)
	}
	pod, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, "resized-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("the refused resize changed the pod's request to %s", got.String())
	}
	// Shrinking is always allowed.
	if err := resize("500m"); err != nil {
		t.Fatalf("shrinking: %v", err)
	}
}

// reportResources writes what a kubelet with in-place resize reports and kwok
// does not: the resources a running container was started with. The API
// server refuses a resize of a pod whose running containers lack them, as
// running on a node that cannot resize.
func reportResources(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	pods := cluster.Client.CoreV1().Pods(ns)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		for _, c := range pod.Spec.Containers {
			if c.Name == cs.Name {
				cs.Resources = c.Resources.DeepCopy()
			}
		}
	}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestElasticQuotaWebhookAfterFlavorDeleted: once a ResourceFlavor a tree
// names is deleted, the writes that leave the spec alone (a label, a re-apply
// of the same spec by another tool, the garbage collector ending a foreground
// deletion) and an edit that keeps the reference where it was still go
// through, as Kubernetes ratchets validation; an edit that names a missing
// flavor anew is refused. The tree is outside kube-system: the webhook
// judges it all the same, and nothing is enforced from it.
func TestElasticQuotaWebhookAfterFlavorDeleted(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	flavorName := "e2e-gone-" + rand.String(5)
	apply(t, ctx, []byte(fmt.Sprintf(`{apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: %s}, spec: {nodeLabels: {pool: gone}}}`, flavorName)))
	flavors := cluster.Dynamic.Resource(resourceFlavors)
	t.Cleanup(func() { _ = flavors.Delete(context.Background(), flavorName, metav1.DeleteOptions{}) })
	manifest := func(leafMax, flavor string) []byte {
		return []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: flavored, namespace: %s}
spec:
  root:
    name: root
    min: {cpu: 8}
    max: {cpu: 8}
    children:
    - {name: pinned, namespaces: [%s], max: {cpu: %s}, attributes: {resourceflavors: %s}}
`, ns, ns, leafMax, flavor))
	}
	apply(t, ctx, manifest("4", flavorName))
	if err := flavors.Delete(ctx, flavorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refusal := func(node, flavor string) string {
		return fmt.Sprintf(`admission webhook "elasticquotatree.quotascale.io" denied the request: ElasticQuotaTree %s/flavored is invalid: `+
			`quota node %q: ResourceFlavor %q does not exist`, ns, node, flavor)
	}
	waitFor(t, ctx, "the webhook to know the flavor is gone", func(ctx context.Context) error {
		// A dry run of the same tree under another name is a create.
		objs, err := localcluster.DecodeManifests(manifest("4", flavorName))
		if err != nil {
			return err
		}
		u := objs[0]
		u.SetName("flavored-probe")
		_, err = cluster.Dynamic.Resource(elasticQuotaTrees).Namespace(ns).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if msg := apiStatusMessage(err); !strings.Contains(msg, fmt.Sprintf("ResourceFlavor %q does not exist", flavorName)) {
			return fmt.Errorf("creating a tree naming the deleted flavor: %v", err)
		}
		return nil
	})

	trees := cluster.Dynamic.Resource(elasticQuotaTrees).Namespace(ns)
	// kubectl label.
	if _, err := trees.Patch(ctx, "flavored", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"platform"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("labelling the tree: %s", apiStatusMessage(err))
	}
	// A re-apply of the same spec, by this test's field manager and by another
	// tool's.
	if _, err := cluster.Apply(ctx, manifest("4", flavorName)); err != nil {
		t.Errorf("re-applying the same spec: %s", apiStatusMessage(err))
	}
	body, err := yaml.YAMLToJSON(manifest("4", flavorName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trees.Patch(ctx, "flavored", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "argocd-controller", Force: ptr.To(true)}); err != nil {
		t.Errorf("re-applying the same spec as another field manager: %s", apiStatusMessage(err))
	}
	// An edit that keeps the reference where it was is ratcheted.
	if _, err := cluster.Apply(ctx, manifest("6", flavorName)); err != nil {
		t.Errorf("raising the pinned leaf's max: %s", apiStatusMessage(err))
	}
	// Naming a missing flavor anew is refused.
	other := "e2e-never-" + rand.String(5)
	_, err = cluster.Apply(ctx, manifest("6", other))
	if diff := cmp.Diff(refusal("pinned", other), apiStatusMessage(err)); diff != "" {
		t.Errorf("pointing the leaf at another missing flavor (-want +got):\n%s", diff)
	}

	// kubectl delete --cascade=foreground: the garbage collector removes the
	// foregroundDeletion finalizer with an update.
	if err := trees.Delete(ctx, "flavored", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the foreground deletion to finish", func(ctx context.Context) error {
		got, err := trees.Get(ctx, "flavored", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, being deleted since %v with finalizers %v", got.GetDeletionTimestamp(), got.GetFinalizers())
	})
}
