package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

func scaleDownGroup(min int) string {
	return fmt.Sprintf(`
nodeGroups:
- name: e2e-kwok-sd
  minSize: %d
  maxSize: 5
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
`, min)
}

// fastScaleDown removes a node as soon as it is unneeded, so tests need no clock.
func fastScaleDown(o *config.Options) {
	o.ScaleDownUnneededTime = 0
	o.ScaleDownDelayAfterAdd = 0
	o.ScaleDownDelayAfterFailure = 0
	o.MaxGracefulTerminationSec = 1
	// A refused eviction fails the drain at once; the drain starts right
	// after the taint.
	o.MaxPodEvictionTime = 0
	o.NodeDeleteDelayAfterTaint = 0
}

// growTo makes the autoscaler add one node per 3-cpu bare "keeper" pod and
// returns the nodes, sorted by name, with the keeper pod each runs.
func growTo(t *testing.T, ctx context.Context, a *testAutoscaler, ns string, n int) []string {
	t.Helper()
	createPods(t, ctx, ns, "keeper", n, "3", nil)
	waitUnschedulable(t, ctx, ns, n)
	a.loop(t, ctx)
	settle(t, ctx, fmt.Sprintf("%d keepers running", n), wantPhases(ns, n, 0))
	return groupNodes(t, ctx)
}

func groupNodes(t *testing.T, ctx context.Context) []string {
	t.Helper()
	names, err := listGroupNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func listGroupNodes(ctx context.Context) ([]string, error) {
	nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.NodeGroupLabel + "=e2e-kwok-sd"})
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// loopUntil runs autoscaler loops until cond holds, as the real loop would keep
// running while its informers catch up.
func (a *testAutoscaler) loopUntil(t *testing.T, ctx context.Context, what string, cond func(ctx context.Context) error) {
	t.Helper()
	waitFor(t, ctx, what, func(ctx context.Context) error {
		if err := a.RunOnce(ctx); err != nil {
			return err
		}
		return cond(ctx)
	})
}

// keptFor waits until the visibility log says why node stays.
func (a *testAutoscaler) keptFor(t *testing.T, ctx context.Context, node, messageID string, params ...string) {
	t.Helper()
	a.loopUntil(t, ctx, "a noScaleDown entry "+messageID+" for "+node, func(context.Context) error {
		return keptEntry(a, node, messageID, params...)
	})
}

func nodeOf(t *testing.T, ctx context.Context, ns, pod string) string {
	t.Helper()
	p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

func deletePod(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if err := cluster.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "pod "+name+" gone", func(ctx context.Context) error {
		if _, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// TestScaleDownRemovesEmptiedNode: after its pod is deleted, a node is removed
// once unneeded (the unneeded time is zero here).
func TestScaleDownRemovesEmptiedNode(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, scaleDownGroup(0), fastScaleDown)
	nodes := growTo(t, ctx, a, ns, 2)
	emptied := nodeOf(t, ctx, ns, "keeper-0")
	deletePod(t, ctx, ns, "keeper-0")
	a.loopUntil(t, ctx, "the emptied node removed", func(ctx context.Context) error {
		got, err := listGroupNodes(ctx)
		if err != nil {
			return err
		}
		want := []string{}
		for _, n := range nodes {
			if n != emptied {
				want = append(want, n)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("nodes (-want +got):\n%s", diff)
		}
		return nil
	})
	if diff := cmp.Diff(map[string]int{"e2e-kwok-sd": 1}, a.targets(t)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

// TestScaleDownKeepsNodeWithBlockingPDB: a node whose only pod could move, but is
// covered by a PodDisruptionBudget allowing no disruption, stays.
func TestScaleDownKeepsNodeWithBlockingPDB(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, scaleDownGroup(0), fastScaleDown)
	growTo(t, ctx, a, ns, 2)
	target := nodeOf(t, ctx, ns, "keeper-1")
	deletePod(t, ctx, ns, "keeper-1")
	createGuardedDeployment(t, ctx, ns, target, nil)
	a.keptFor(t, ctx, target, "no.scale.down.node.NotEnoughPdb")
	if got := groupNodes(t, ctx); !contains(got, target) {
		t.Fatalf("node %s with a PDB-guarded pod was removed; nodes %v", target, got)
	}
}

// TestScaleDownKeepsGroupAtMinSize: an empty node of a group at its min size
// stays.
func TestScaleDownKeepsGroupAtMinSize(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, scaleDownGroup(1), fastScaleDown)
	nodes := growTo(t, ctx, a, ns, 1)
	deletePod(t, ctx, ns, "keeper-0")
	a.keptFor(t, ctx, nodes[0], "no.scale.down.node.NodeGroupMinSizeReached")
	if diff := cmp.Diff(nodes, groupNodes(t, ctx)); diff != "" {
		t.Fatalf("a group at its min size shrank (-want +got):\n%s", diff)
	}
}

// TestScaleDownKeepsTreeRootMin: a tree whose root min needs all current
// allocatable keeps every node, and says why on the node and in the visibility
// log. The root min is what every node of the shared control plane offers,
// since earlier tests may have left nodes of their own.
func TestScaleDownKeepsTreeRootMin(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, scaleDownGroup(0), fastScaleDown)
	nodes := growTo(t, ctx, a, ns, 2)
	rootMin := clusterAllocatableCPU(t, ctx)
	applyTree(t, ctx, []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: "%[2]s"}
    max: {cpu: "%[2]s"}
    children:
    - {name: team, namespaces: [%[1]s], min: {cpu: "%[2]s"}, max: {cpu: "%[2]s"}}
`, ns, rootMin.String())))
	// The scheduler reports the tree in force; the autoscaler's informer may
	// still lag, and an emptied node it judged without the tree would go.
	waitFor(t, ctx, "the autoscaler to see the tree's root min", func(context.Context) error {
		if got := a.RootMin(); got.Cpu().Cmp(rootMin) != 0 {
			return fmt.Errorf("root min %v", got)
		}
		return nil
	})
	emptied := nodeOf(t, ctx, ns, "keeper-0")
	deletePod(t, ctx, ns, "keeper-0")
	belowMin := "below the ElasticQuotaTree root min " + rootMin.String()
	a.keptFor(t, ctx, emptied, "no.scale.down.node.ElasticQuotaTreeRootMin", "removing the node would leave cpu allocatable", belowMin)
	if diff := cmp.Diff(nodes, groupNodes(t, ctx)); diff != "" {
		t.Fatalf("a node the tree's root min needs was removed (-want +got):\n%s", diff)
	}
	waitFor(t, ctx, "a NoScaleDown event on the node", func(ctx context.Context) error {
		events, err := cluster.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + emptied + ",reason=NoScaleDown"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, belowMin) {
				return nil
			}
		}
		return fmt.Errorf("%d NoScaleDown events, none about the root min", len(events.Items))
	})
}

// clusterAllocatableCPU sums the allocatable cpu of every node, as scale-down
// does when it keeps the tree's root min.
func clusterAllocatableCPU(t *testing.T, ctx context.Context) resource.Quantity {
	t.Helper()
	list, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total := resource.Quantity{}
	for _, n := range list.Items {
		total.Add(n.Status.Allocatable[corev1.ResourceCPU])
	}
	return total
}

// TestScaleDownRollsBackTaintOnFailedDrain: a pod that never terminates (held by
// a finalizer) fails the drain; the taint comes off and the node stays.
func TestScaleDownRollsBackTaintOnFailedDrain(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, scaleDownGroup(0), fastScaleDown)
	growTo(t, ctx, a, ns, 2)
	target := nodeOf(t, ctx, ns, "keeper-1")
	deletePod(t, ctx, ns, "keeper-1")
	createGuardedDeployment(t, ctx, ns, target, []string{holdFinalizer})
	t.Cleanup(func() { releaseHeldPods(t, context.Background(), ns) })
	a.loopUntil(t, ctx, "a failed drain", func(context.Context) error {
		if got := counterValue(t, a.Autoscaler, "quotascale_autoscaler_failed_scale_downs_total", nil); got != 1 {
			return fmt.Errorf("failed scale-downs = %v", got)
		}
		return nil
	})
	node, err := cluster.Client.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s was removed despite the failed drain: %v", target, err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == "ToBeDeletedByClusterAutoscaler" {
			t.Fatalf("the ToBeDeleted taint was not rolled back: %+v", node.Spec.Taints)
		}
	}
}

// createGuardedDeployment runs one 1-cpu pod preferring node (so it could move).
// Without finalizers a PodDisruptionBudget allowing no disruption covers it; with
// them there is no budget and the finalizers hold an evicted pod in Terminating.
func createGuardedDeployment(t *testing.T, ctx context.Context, ns, node string, finalizers []string) {
	t.Helper()
	labels := map[string]string{"app": "guarded"}
	deploymentOn(t, ctx, ns, node, "guarded", func(s *corev1.PodSpec, m *metav1.ObjectMeta) {
		m.Finalizers = finalizers
		s.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	})
	if finalizers == nil {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
		}
		if _, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the PDB's status", func(ctx context.Context) error {
			got, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guarded", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.ObservedGeneration != got.Generation || got.Status.CurrentHealthy != 1 {
				return fmt.Errorf("status %+v", got.Status)
			}
			return nil
		})
	}
}

func firstNode(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return ""
	}
	return pods[0].Spec.NodeName
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// keptEntry finds a noScaleDown entry for node with the message id (and
// parameters) in the autoscaler's visibility log.
func keptEntry(a *testAutoscaler, node, messageID string, params ...string) error {
	data, err := os.ReadFile(a.opts.VisibilityLogFile)
	if err != nil {
		return err
	}
	want := fmt.Sprintf(`{"node":{"name":%q,"nodeGroup":"e2e-kwok-sd"},"reason":{"messageId":%q`, node, messageID)
	var about []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, fmt.Sprintf("%q", node)) {
			about = append(about, line)
		}
		if !strings.Contains(line, want) {
			continue
		}
		ok := true
		for _, p := range params {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return nil
		}
	}
	if len(about) > 3 {
		about = about[len(about)-3:]
	}
	return fmt.Errorf("no noScaleDown entry %s %v in the visibility log; its last lines about the node: %s", want, params, strings.Join(about, "\n"))
}
