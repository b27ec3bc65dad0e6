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
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/localcluster"
)

// seedTreeFor is seed 000's tree with its four namespaces renamed, so the test
// owns them.
func seedTreeFor(t *testing.T, namespaces [4]string) []byte {
	t.Helper()
	tree := string(readTestdata(t, "elastic-quota-tree/tree.yaml"))
	for i, ns := range namespaces {
		tree = strings.Replace(tree, fmt.Sprintf("namespace%d]", i+1), ns+"]", 1)
	}
	return []byte(tree)
}

const eightCPUGroup = `
nodeGroups:
- name: e2e-kwok-8cpu
  minSize: 0
  maxSize: 10
  capacity: {cpu: "8", memory: 32Gi}
  provisioningDelay: 1s
`

// TestAutoscalerHonoursElasticQuota: namespace1 of seed 000 deploys five 5-cpu
// pods under a leaf max of 20. Nodes come for four; the fifth, which the tree will
// never admit, gets no node and says why.
func TestAutoscalerHonoursElasticQuota(t *testing.T) {
	ctx := testContext(t)
	var namespaces [4]string
	for i := range namespaces {
		namespaces[i] = createNamespace(t, ctx, "")
	}
	applyTree(t, ctx, seedTreeFor(t, namespaces))
	a := startAutoscaler(t, ctx, eightCPUGroup, nil)
	applyInNamespace(t, ctx, namespaces[0], []byte(strings.Replace(string(readTestdata(t, "elastic-quota-tree/nginx1.yaml")),
		"namespace: namespace1", "namespace: default", 1)))
	waitUnschedulable(t, ctx, namespaces[0], 5)

	want := map[string]int{"e2e-kwok-8cpu": 4}
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	settle(t, ctx, "4 running, 1 pending", wantPhases(namespaces[0], 4, 1))
	for i := 0; i < 2; i++ {
		a.loop(t, ctx)
	}
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("a node was added for the pod the tree refuses (-want +got):\n%s", diff)
	}
	wantPodEvent(t, ctx, namespaces[0], `pod didn't trigger scale-up: exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu`)
}

// TestAutoscalerFollowsResourceFlavor: a leaf with resourceflavors: spot grows only
// the spot group, though the on-demand group would win the expander's tie.
func TestAutoscalerFollowsResourceFlavor(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	apply(t, ctx, readTestdataFlavor(t))
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 64}
    max: {cpu: 64}
    children:
    - {name: child, namespaces: [%s], attributes: {resourceflavors: spot}, min: {cpu: 8}, max: {cpu: 64}}
`, ns)))
	a := startAutoscaler(t, ctx, `
nodeGroups:
- name: e2e-kwok-a-ondemand
  minSize: 0
  maxSize: 5
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
- name: e2e-kwok-b-spot
  minSize: 0
  maxSize: 5
  labels: {instance-type: spot}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
`, nil)
	createPods(t, ctx, ns, "flavored", 2, "1", nil)
	waitUnschedulable(t, ctx, ns, 2)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-a-ondemand": 0, "e2e-kwok-b-spot": 1}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	settle(t, ctx, "both pods running on the spot node", wantPhases(ns, 2, 0))
}

// TestAutoscalerIgnoresReclaimPreemptor: while the scheduler reclaims for a pod
// (its victim held in Terminating by a finalizer), the autoscaler adds no node
// for it; once the victim is gone the pod runs on the existing node.
func TestAutoscalerIgnoresReclaimPreemptor(t *testing.T) {
	ctx := testContext(t)
	a, b := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	createNodes(t, ctx, localcluster.NodeSpec{Name: "reclaim-1", Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10"), corev1.ResourceMemory: resource.MustParse("40Gi")}})
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 10}
    max: {cpu: 10}
    children:
    - {name: qa, namespaces: [%s], min: {cpu: 5}, max: {cpu: 10}}
    - {name: qb, namespaces: [%s], min: {cpu: 5}, max: {cpu: 10}}
`, a, b)))
	scaler := startAutoscaler(t, ctx, eightCPUGroup, nil)
	createHeldPods(t, ctx, a, "borrower", 2, "5")
	settle(t, ctx, "qa borrowing the whole root", wantRunning([]string{a}, []int{2}))

	createPods(t, ctx, b, "owner", 1, "5", nil)
	var preemptor *corev1.Pod
	waitFor(t, ctx, "the owner's pod nominated by a reclaim", func(ctx context.Context) error {
		p, err := cluster.Client.CoreV1().Pods(b).Get(ctx, "owner-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.NominatedNodeName == "" {
			return fmt.Errorf("not nominated yet")
		}
		preemptor = p
		return nil
	})
	for i := 0; i < 2; i++ {
		scaler.loop(t, ctx)
	}
	if diff := cmp.Diff(map[string]int{"e2e-kwok-8cpu": 0}, scaler.targets(t)); diff != "" {
		t.Fatalf("a node was bought during the reclaim (-want +got):\n%s", diff)
	}
	releaseHeldPods(t, ctx, a)
	settle(t, ctx, "the owner's pod running on the existing node", func(ctx context.Context) error {
		p, err := cluster.Client.CoreV1().Pods(b).Get(ctx, "owner-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != preemptor.UID || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "reclaim-1" {
			return fmt.Errorf("owner pod %s on %q, phase %s", p.UID, p.Spec.NodeName, p.Status.Phase)
		}
		return nil
	})
	scaler.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-8cpu": 0}, scaler.targets(t)); diff != "" {
		t.Fatalf("targets after the reclaim (-want +got):\n%s", diff)
	}
}

// TestAutoscalerAdmittedPodStillScalesUp: pods their quota admits and no node
// fits trigger a normal scale-up, within the CapacityQuota limits.
func TestAutoscalerAdmittedPodStillScalesUp(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 20}
    max: {cpu: 20}
    children:
    - {name: team, namespaces: [%s], min: {cpu: 10}, max: {cpu: 20}}
`, ns)))
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-one-node}
spec:
  limits: {resources: {nodes: 1}}
`))
	a := startAutoscaler(t, ctx, fourCPUGroup, nil)
	createPods(t, ctx, ns, "work", 3, "3", nil)
	waitUnschedulable(t, ctx, ns, 3)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 1}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	a.loop(t, ctx)
	wantPodEvent(t, ctx, ns, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/e2e-one-node", resources: nodes`)
}

const holdFinalizer = "e2e.quotascale.io/hold"

// createHeldPods creates bare pods carrying a finalizer, so an eviction leaves
// them Terminating until releaseHeldPods.
func createHeldPods(t *testing.T, ctx context.Context, ns, prefix string, n int, cpu string) {
	t.Helper()
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns, Finalizers: []string{holdFinalizer}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}},
		}
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { releaseHeldPods(t, context.Background(), ns) })
}

func releaseHeldPods(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	for _, p := range pods.Items {
		if len(p.Finalizers) == 0 {
			continue
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := cluster.Client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	}
}
