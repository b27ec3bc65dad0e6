package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
)

// clusterAPIModule is the Cluster API release whose CRDs the test installs. They
// come from the Go module cache at test time and are not part of this repository.
const clusterAPIModule = "sigs.k8s.io/cluster-api@v1.14.2"

var (
	capiMachineDeployments = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
	capiMachineSets        = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinesets"}
	capiMachines           = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}

	capiCRDsOnce sync.Once
	capiCRDsErr  error
)

// installClusterAPICRDs installs the MachineDeployment, MachineSet and Machine
// CRDs once per test binary. `go mod download` runs outside this module, so
// go.mod does not change; with the module already cached it needs no network.
func installClusterAPICRDs(t *testing.T, ctx context.Context) {
	t.Helper()
	capiCRDsOnce.Do(func() { capiCRDsErr = doInstallClusterAPICRDs(ctx, t.TempDir()) })
	if capiCRDsErr != nil {
		t.Fatal(capiCRDsErr)
	}
}

func doInstallClusterAPICRDs(ctx context.Context, scratch string) error {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", clusterAPIModule)
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go mod download %s: %w\n%s", clusterAPIModule, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("go mod download %s: no module directory (%v, %s)", clusterAPIModule, err, mod.Error)
	}
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	for _, resource := range []string{"machinedeployments", "machinesets", "machines"} {
		path := filepath.Join(mod.Dir, "core", "config", "crd", "bases", "cluster.x-k8s.io_"+resource+".yaml")
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

func capiObject(kind, ns, name string, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	u.SetAnnotations(annotations)
	return u
}

func capiMachineSpec(providerID string) map[string]any {
	spec := map[string]any{
		"clusterName":       "workload",
		"bootstrap":         map[string]any{"dataSecretName": "bootstrap-data"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "infra"},
	}
	if providerID != "" {
		spec["providerID"] = providerID
	}
	return spec
}

func capiScalableSpec(replicas int64, pool string) map[string]any {
	template := capiMachineSpec("")
	template["infrastructureRef"] = map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "infra"}
	return map[string]any{
		"clusterName": "workload",
		"replicas":    replicas,
		"selector":    map[string]any{"matchLabels": map[string]any{"pool": pool}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"pool": pool, "node-role.kubernetes.io/worker": ""}},
			"spec":     template,
		},
	}
}

func capiCreate(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	created, err := cluster.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if status != nil {
		created.Object["status"] = status
		if created, err = cluster.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("setting the status of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return created
}

func capiReplicas(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (int64, *unstructured.Unstructured) {
	t.Helper()
	u, err := cluster.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return r, u
}

// TestClusterAPIProvider: annotated MachineDeployments and MachineSets on the real
// API server, with Cluster API's own CRDs, are discovered and scaled through the
// scale subresource. No Cluster API controller runs, so the test checks what
// the provider asks for: spec.replicas, written by the scale subresource, and
// the delete-machine annotations.
func TestClusterAPIProvider(t *testing.T) {
	ctx := testContext(t)
	installClusterAPICRDs(t, ctx)
	ns := createNamespace(t, ctx, "")
	sizes := map[string]string{
		clusterapi.NodeGroupMinSizeAnnotation: "1", clusterapi.NodeGroupMaxSizeAnnotation: "5",
		clusterapi.CPUAnnotation: "4", clusterapi.MemoryAnnotation: "16Gi",
	}
	md := capiCreate(t, ctx, capiMachineDeployments, capiObject("MachineDeployment", ns, "md-auto", sizes, capiScalableSpec(2, "auto")), nil)
	capiCreate(t, ctx, capiMachineDeployments, capiObject("MachineDeployment", ns, "md-plain", nil, capiScalableSpec(1, "plain")), nil)
	owned := capiObject("MachineSet", ns, "md-auto-abcde", sizes, capiScalableSpec(2, "auto"))
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineDeployment", Name: "md-auto", UID: md.GetUID()}})
	capiCreate(t, ctx, capiMachineSets, owned, nil)
	capiCreate(t, ctx, capiMachineSets, capiObject("MachineSet", ns, "ms-auto", map[string]string{
		clusterapi.NodeGroupMinSizeAnnotation: "0", clusterapi.NodeGroupMaxSizeAnnotation: "2"}, capiScalableSpec(0, "standalone")), nil)

	machine := func(name, providerID string, status map[string]any) {
		m := capiObject("Machine", ns, name, nil, capiMachineSpec(providerID))
		m.SetLabels(map[string]string{clusterapi.DeploymentNameLabel: "md-auto", "pool": "auto"})
		capiCreate(t, ctx, capiMachines, m, status)
	}
	machine("md-auto-a-running", "docker:////md-auto-a-running", map[string]any{"phase": "Running", "nodeRef": map[string]any{"name": "node-a"}})
	machine("md-auto-b-provisioning", "", map[string]any{"phase": "Provisioning"})
	machine("md-auto-c-failed", "", map[string]any{"phase": "Failed", "deprecated": map[string]any{"v1beta1": map[string]any{
		"failureReason": "CreateError", "failureMessage": "no capacity in zone"}}})

	p, err := clusterapi.NewProvider(ctx, clusterapi.Options{Client: cluster.Dynamic, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range p.NodeGroups() {
		ids = append(ids, g.Id())
	}
	autoID := "MachineDeployment/" + ns + "/md-auto"
	if diff := cmp.Diff([]string{autoID, "MachineSet/" + ns + "/ms-auto"}, ids); diff != "" {
		t.Fatalf("node groups (-want +got):\n%s", diff)
	}
	auto := cpGroup(t, p, autoID)
	if diff := cmp.Diff([]string{
		"clusterapi-pending://" + ns + "/md-auto-b-provisioning Creating",
		"clusterapi-pending://" + ns + "/md-auto-c-failed Creating class=2 CreateError",
		"docker:////md-auto-a-running Running",
	}, cpInstanceStates(t, auto)); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	runningNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{
		clusterapi.MachineAnnotation: "md-auto-a-running", clusterapi.ClusterNamespaceAnnotation: ns}}}
	if g, err := p.NodeGroupForNode(runningNode); err != nil || g == nil || g.Id() != autoID {
		t.Errorf("NodeGroupForNode(node-a) = %v, %v; want %s", g, err, autoID)
	}
	if info, err := auto.TemplateNodeInfo(); err != nil || info.Node.Status.Capacity.Cpu().String() != "4" {
		t.Errorf("template: %v, %v", info, err)
	}

	t.Run("IncreaseSize goes through the scale subresource", func(t *testing.T) {
		if err := auto.IncreaseSize(2); err != nil {
			t.Fatal(err)
		}
		replicas, obj := capiReplicas(t, ctx, capiMachineDeployments, ns, "md-auto")
		if replicas != 4 {
			t.Errorf("spec.replicas %d, want 4", replicas)
		}
		viaScale := false
		for _, mf := range obj.GetManagedFields() {
			if mf.Manager == clusterapi.FieldManager {
				viaScale = mf.Subresource == "scale"
			}
		}
		if !viaScale {
			t.Errorf("spec.replicas was not written by %s through the scale subresource: %+v", clusterapi.FieldManager, obj.GetManagedFields())
		}
		err := auto.IncreaseSize(2)
		if want := autoID + ": increasing the size by 2 to 6 would exceed the max size 5"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
		if size, _ := auto.TargetSize(); size != 4 {
			t.Errorf("target size %d, want 4", size)
		}
		standalone := cpGroup(t, p, "MachineSet/"+ns+"/ms-auto")
		if err := standalone.IncreaseSize(1); err != nil {
			t.Fatal(err)
		}
		if replicas, _ := capiReplicas(t, ctx, capiMachineSets, ns, "ms-auto"); replicas != 1 {
			t.Errorf("MachineSet spec.replicas %d, want 1", replicas)
		}
	})

	marked := func() []string {
		list, err := cluster.Dynamic.Resource(capiMachines).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range list.Items {
			if _, ok := m.GetAnnotations()[clusterapi.DeleteMachineAnnotation]; ok {
				out = append(out, m.GetName())
			}
		}
		return out
	}

	t.Run("DecreaseTargetSize marks only machines without nodes", func(t *testing.T) {
		// 4 replicas, 3 machines: one replica has no machine yet, so cancelling two
		// needs one machine marked, the newest without a node.
		if err := auto.DecreaseTargetSize(-2); err != nil {
			t.Fatal(err)
		}
		if replicas, _ := capiReplicas(t, ctx, capiMachineDeployments, ns, "md-auto"); replicas != 2 {
			t.Errorf("spec.replicas %d, want 2", replicas)
		}
		if got := marked(); len(got) != 1 || got[0] == "md-auto-a-running" {
			t.Errorf("marked machines %v, want one machine without a node", got)
		}
		err := auto.DecreaseTargetSize(-2)
		if want := autoID + ": cannot decrease the target size by 2: 1 of its 2 replicas have registered nodes"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	})

	t.Run("DeleteNodes marks the machine and scales down", func(t *testing.T) {
		before := marked()
		if err := auto.DeleteNodes([]*corev1.Node{runningNode}); err != nil {
			t.Fatal(err)
		}
		if replicas, _ := capiReplicas(t, ctx, capiMachineDeployments, ns, "md-auto"); replicas != 1 {
			t.Errorf("spec.replicas %d, want 1", replicas)
		}
		if diff := cmp.Diff(append(before, "md-auto-a-running"), marked(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("marked machines (-want +got):\n%s", diff)
		}
		failedNode := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "clusterapi-pending://" + ns + "/md-auto-b-provisioning"}}
		err := auto.DeleteNodes([]*corev1.Node{failedNode})
		if want := autoID + ": deleting 1 nodes would shrink it from 1 to 0, below its min size 1"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
		other := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "kwok://somewhere/else"}}
		if err := auto.DeleteNodes([]*corev1.Node{other}); err == nil {
			t.Errorf("deleting a node of no machine: want an error")
		}
	})

	if g, err := p.NodeGroupForNode(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "docker:////elsewhere"}}); err != nil || g != nil {
		t.Errorf("NodeGroupForNode(unknown) = %v, %v; want nil", g, err)
	}
	var _ cloudprovider.CloudProvider = p
}
