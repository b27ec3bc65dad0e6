package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/localcluster"
)

// TestElasticQuotaTreeSeedScenario drives seed 000 as written: borrow, then
// reclaim, with a scheduler restart in the middle.
func TestElasticQuotaTreeSeedScenario(t *testing.T) {
	ctx := testContext(t)
	namespaces := []string{"namespace1", "namespace2", "namespace3", "namespace4"}
	for _, ns := range namespaces {
		createNamespace(t, ctx, ns)
	}
	big := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("56"), corev1.ResourceMemory: resource.MustParse("224Gi")}
	createNodes(t, ctx, localcluster.NodeSpec{Name: "seed-1", Capacity: big}, localcluster.NodeSpec{Name: "seed-2", Capacity: big})
	applyTree(t, ctx, readTestdata(t, "elastic-quota-tree/tree.yaml"))
	checker := invariants(t)

	steps := []struct {
		manifest string
		want     []int
	}{
		{"nginx1.yaml", []int{4, 0, 0, 0}},
		{"nginx2.yaml", []int{4, 4, 0, 0}},
		{"nginx3.yaml", []int{3, 3, 2, 0}},
		{"nginx4.yaml", []int{2, 2, 2, 2}},
	}
	for i, step := range steps {
		apply(t, ctx, readTestdata(t, "elastic-quota-tree/"+step.manifest))
		settle(t, ctx, "after "+step.manifest, func(ctx context.Context) error {
			got, err := runningPerNamespace(ctx, namespaces)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(step.want, got); diff != "" {
				return fmt.Errorf("running pods per namespace (-want +got):\n%s", diff)
			}
			return nil
		})
		switch i {
		case 0:
			// The 5th pod says which quota node refused it, on what, with the numbers.
			assertPendingPodEvent(t, ctx, "namespace1", `exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20`)
		case 1:
			restartSchedulerEvictsNothing(t, ctx, namespaces)
		}
	}
	if got := checker.Counts().Reclaims; got != 4 {
		t.Errorf("want 4 reclaim evictions (one pod of ns1 and ns2 for each of ns3 and ns4), got %d", got)
	}

	// Every leaf sits on its min: what is pending now is refused at the root.
	assertPendingPodEvent(t, ctx, "namespace4", `exceeded elastic quota "root": cpu used 40, requested 5, max 40`)
	waitFor(t, ctx, "tree status with the figures of every quota node", func(ctx context.Context) error {
		got, err := getTree(ctx, "kube-system", "elasticquotatree")
		if err != nil {
			return err
		}
		used := map[string]string{}
		for _, q := range got.Status.Quotas {
			cpu := q.Used[corev1.ResourceCPU]
			used[q.Name] = cpu.String()
		}
		want := map[string]string{"root": "40", "root.a": "20", "root.a.1": "10", "root.a.2": "10", "root.b": "20", "root.b.1": "10", "root.b.2": "10"}
		if diff := cmp.Diff(want, used); diff != "" {
			return fmt.Errorf("status.quotas used cpu (-want +got):\n%s", diff)
		}
		return nil
	})
}

// restartSchedulerEvictsNothing restarts the scheduler and checks that usage is
// rebuilt from the bound pods: the same pods keep running, and the pending ones
// stay pending.
func restartSchedulerEvictsNothing(t *testing.T, ctx context.Context, namespaces []string) {
	t.Helper()
	before, err := runningUIDs(ctx, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	cluster.StopScheduler()
	if err := cluster.StartScheduler(ctx, localcluster.SchedulerOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t, ctx, "after the scheduler restart", func(ctx context.Context) error {
		after, err := runningUIDs(ctx, namespaces)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(before, after); diff != "" {
			return fmt.Errorf("running pods changed across the restart (-before +after):\n%s", diff)
		}
		return nil
	})
}

// TestElasticQuotaFlatReclaim: two quotas of min 4 / max 6 cpu share 8 cpu. The
// first borrows up to 6, the second reclaims its 4.
func TestElasticQuotaFlatReclaim(t *testing.T) {
	ctx := testContext(t)
	a, b := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "flat-1", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}})
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 8}
    max: {cpu: 8}
    children:
    - {name: qa, namespaces: [%s], min: {cpu: 4}, max: {cpu: 6}}
    - {name: qb, namespaces: [%s], min: {cpu: 4}, max: {cpu: 6}}
`, a, b)))
	createDeployment(t, ctx, a, "work", 4, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	settle(t, ctx, "qa borrowing up to its max", wantRunning([]string{a, b}, []int{3, 0}))
	createDeployment(t, ctx, b, "work", 2, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	settle(t, ctx, "qb reclaiming its min", wantRunning([]string{a, b}, []int{2, 2}))
}

// TestElasticQuotaGPUReclaim: A (min 4, max 5) runs 5 of 5 GPUs; B (min 1) asks for
// one: exactly one A pod is evicted.
func TestElasticQuotaGPUReclaim(t *testing.T) {
	ctx := testContext(t)
	a, b := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "gpu-1", Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"), "nvidia.com/gpu": resource.MustParse("5")}})
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {nvidia.com/gpu: 5}
    max: {nvidia.com/gpu: 5}
    children:
    - {name: team-a, namespaces: [%s], min: {nvidia.com/gpu: 4}, max: {nvidia.com/gpu: 5}}
    - {name: team-b, namespaces: [%s], min: {nvidia.com/gpu: 1}, max: {nvidia.com/gpu: 5}}
`, a, b)))
	checker := invariants(t)
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	createDeployment(t, ctx, a, "train", 5, gpu)
	settle(t, ctx, "team A using all 5 GPUs", wantRunning([]string{a, b}, []int{5, 0}))
	createDeployment(t, ctx, b, "infer", 1, gpu)
	settle(t, ctx, "team B reclaiming its one GPU", wantRunning([]string{a, b}, []int{4, 1}))
	if got := checker.Counts().Reclaims; got != 1 {
		t.Errorf("want exactly one evicted A pod, got %d", got)
	}
}

// TestElasticQuotaMissingResourceIsUnlimited: a leaf whose max lists only cpu does
// not block pods that request memory.
func TestElasticQuotaMissingResourceIsUnlimited(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "cpu-only-1", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("256Gi")}})
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 8}
    max: {cpu: 8}
    children:
    - {name: cpu-only, namespaces: [%s], min: {cpu: 4}, max: {cpu: 8}}
`, ns)))
	createDeployment(t, ctx, ns, "memory-hungry", 2, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("100Gi")})
	settle(t, ctx, "both memory-heavy pods running", wantRunning([]string{ns}, []int{2}))
}

// TestElasticQuotaInvalidUpdateKeepsLastValidTree: an invalid update that got
// past the admission webhook (down, here) is reported on the tree and in an
// event, and scheduling goes on under the previous tree.
func TestElasticQuotaInvalidUpdateKeepsLastValidTree(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "invalid-1", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}})
	applyTree(t, ctx, teamTree(ns, "2", "4"))
	cluster.SetWebhookAvailable(false)
	t.Cleanup(func() { cluster.SetWebhookAvailable(true) })
	apply(t, ctx, teamTree(ns, "6", "4"))
	var generation int64
	waitFor(t, ctx, "Valid=False with the broken rules", func(ctx context.Context) error {
		got, err := getTree(ctx, "kube-system", "elasticquotatree")
		if err != nil {
			return err
		}
		generation = got.Generation
		valid := meta.FindStatusCondition(got.Status.Conditions, schedulingv1beta1.ConditionValid)
		active := meta.FindStatusCondition(got.Status.Conditions, schedulingv1beta1.ConditionActive)
		if got.Status.ObservedGeneration != got.Generation || valid == nil || active == nil {
			return fmt.Errorf("status not written for generation %d yet: %+v", got.Generation, got.Status)
		}
		if valid.Status != metav1.ConditionFalse || !strings.Contains(valid.Message, `"team"`) || !strings.Contains(valid.Message, "min cpu 6") {
			return fmt.Errorf("Valid condition %+v", valid)
		}
		if want := fmt.Sprintf("generation %d is invalid; generation %d stays in force", got.Generation, got.Generation-1); active.Message != want {
			return fmt.Errorf("Active condition %+v, want message %q", active, want)
		}
		return nil
	})
	waitFor(t, ctx, "a Warning event on the tree", func(ctx context.Context) error {
		events, err := cluster.Client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=elasticquotatree"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "InvalidElasticQuotaTree" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "min cpu 6") {
				return nil
			}
		}
		return fmt.Errorf("no InvalidElasticQuotaTree event among %d events", len(events.Items))
	})
	// The previous tree (max 4) still governs: 4 of 6 one-cpu pods run.
	createDeployment(t, ctx, ns, "work", 6, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	settle(t, ctx, "scheduling under the last valid tree", wantRunning([]string{ns}, []int{4}))
	t.Logf("generation %d stayed invalid while the previous one governed", generation)
}

// TestElasticQuotaTreeOutsideKubeSystemIsIgnored: only kube-system's tree is in
// force; another one says so on its status.
func TestElasticQuotaTreeOutsideKubeSystemIsIgnored(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	apply(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elsewhere, namespace: %s}
spec:
  root: {name: root, min: {cpu: 1}, max: {cpu: 1}, children: [{name: leaf, namespaces: [%s], max: {cpu: 1}}]}
`, ns, ns)))
	waitFor(t, ctx, "Active=False on a tree outside kube-system", func(ctx context.Context) error {
		got, err := getTree(ctx, ns, "elsewhere")
		if err != nil {
			return err
		}
		active := meta.FindStatusCondition(got.Status.Conditions, schedulingv1beta1.ConditionActive)
		if active == nil || active.Status != metav1.ConditionFalse || active.Reason != schedulingv1beta1.ReasonIgnored {
			return fmt.Errorf("Active condition %+v", active)
		}
		return nil
	})
}

// TestResourceFlavorPinsQuotaNode: a leaf with resourceflavors: spot places pods
// only on nodes carrying the flavor's labels.
func TestResourceFlavorPinsQuotaNode(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	shape := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}
	createNodes(t, ctx,
		localcluster.NodeSpec{Name: "flavor-ondemand", Capacity: shape},
		localcluster.NodeSpec{Name: "flavor-spot", Capacity: shape, Labels: map[string]string{"instance-type": "spot"}},
	)
	apply(t, ctx, readTestdataFlavor(t))
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - name: child
      namespaces: [%s]
      attributes: {resourceflavors: spot}
      min: {cpu: 8}
      max: {cpu: 16}
`, ns)))
	createDeployment(t, ctx, ns, "spot-only", 4, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	settle(t, ctx, "all pods on the spot node", func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		nodes := map[string]int{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				nodes[p.Spec.NodeName]++
			}
		}
		if diff := cmp.Diff(map[string]int{"flavor-spot": 4}, nodes); diff != "" {
			return fmt.Errorf("running pods per node (-want +got):\n%s", diff)
		}
		return nil
	})
}

func readTestdataFlavor(t *testing.T) []byte {
	t.Helper()
	return []byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: "spot"
spec:
  nodeLabels:
    instance-type: spot
`)
}

// applyTree applies a tree in kube-system, waits until the scheduler enforces its
// generation, and deletes it when the test ends.
func applyTree(t *testing.T, ctx context.Context, manifest []byte) *schedulingv1beta1.ElasticQuotaTree {
	t.Helper()
	objs := apply(t, ctx, manifest)
	tree := &schedulingv1beta1.ElasticQuotaTree{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, tree); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Dynamic.Resource(elasticQuotaTrees).Namespace(tree.Namespace).Delete(context.Background(), tree.Name, metav1.DeleteOptions{})
	})
	waitFor(t, ctx, "the tree to be in force", func(ctx context.Context) error {
		got, err := getTree(ctx, tree.Namespace, tree.Name)
		if err != nil {
			return err
		}
		active := meta.FindStatusCondition(got.Status.Conditions, schedulingv1beta1.ConditionActive)
		if got.Status.ObservedGeneration != tree.Generation || active == nil || active.Status != metav1.ConditionTrue {
			return fmt.Errorf("generation %d not in force yet: %+v", tree.Generation, got.Status.Conditions)
		}
		return nil
	})
	return tree
}

func getTree(ctx context.Context, namespace, name string) (*schedulingv1beta1.ElasticQuotaTree, error) {
	u, err := cluster.Dynamic.Resource(elasticQuotaTrees).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	tree := &schedulingv1beta1.ElasticQuotaTree{}
	return tree, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, tree)
}

func createDeployment(t *testing.T, ctx context.Context, namespace, name string, replicas int32, requests corev1.ResourceList) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause",
					Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests},
				}}},
			},
		},
	}
	if _, err := cluster.Client.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func runningPerNamespace(ctx context.Context, namespaces []string) ([]int, error) {
	out := make([]int, len(namespaces))
	for i, ns := range namespaces {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[i]++
			}
		}
	}
	return out, nil
}

func wantRunning(namespaces []string, want []int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		got, err := runningPerNamespace(ctx, namespaces)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("running pods per namespace (-want +got):\n%s", diff)
		}
		return nil
	}
}

func runningUIDs(ctx context.Context, namespaces []string) ([]types.UID, error) {
	var out []types.UID
	for _, ns := range namespaces {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				out = append(out, p.UID)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// assertPendingPodEvent finds a Pending pod of namespace with a FailedScheduling
// event containing want.
func assertPendingPodEvent(t *testing.T, ctx context.Context, namespace, want string) {
	t.Helper()
	waitFor(t, ctx, "a FailedScheduling event naming the quota", func(ctx context.Context) error {
		events, err := cluster.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if strings.Contains(e.Message, want) {
				return nil
			}
			seen = append(seen, e.Message)
		}
		return fmt.Errorf("no event containing %q; saw %q", want, seen)
	})
}

// settle waits for cond, then requires it to keep holding for a while: the
// scheduler must have stopped moving pods, not merely passed through the state.
func settle(t *testing.T, ctx context.Context, what string, cond func(ctx context.Context) error) {
	t.Helper()
	waitFor(t, ctx, what, cond)
	// The poll's own context expires by design; cond runs on the test's.
	var broken error
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		broken = cond(ctx)
		return broken != nil, nil
	})
	if broken != nil {
		t.Fatalf("%s held, then stopped holding: %v", what, broken)
	}
}
