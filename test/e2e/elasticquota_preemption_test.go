package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
)

// The priority preemption scenario of issue 17, as a new user tries it: one
// 8-cpu node, two PriorityClasses, four low-priority 2-cpu pods filling the
// node, then a high-priority 2-cpu pod. Stock kube-scheduler preempts one low
// pod; so must Quotascale's, outside the tree and inside one leaf.

// priorityClasses creates a low and a high PriorityClass for the test and
// returns their names.
func priorityClasses(t *testing.T, ctx context.Context) (low, high string) {
	t.Helper()
	suffix := rand.String(5)
	for name, value := range map[string]int32{"e2e-low-" + suffix: 10, "e2e-high-" + suffix: 1000} {
		createPriorityClass(t, ctx, name, value)
		t.Cleanup(func() {
			_ = cluster.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return "e2e-low-" + suffix, "e2e-high-" + suffix
}

// pinnedPod is a bare 2-cpu pod of priorityClass that may only run on node.
func pinnedPod(t *testing.T, ctx context.Context, ns, name, node, priorityClass string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"e2e-node": node},
			PriorityClassName:             priorityClass,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			}},
		},
	}
	if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningOn lists the pods of ns running on node, sorted.
func runningOn(ctx context.Context, ns, node string) ([]string, error) {
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// preemptionScenario fills an 8-cpu node with four low-priority pods of ns,
// then creates a high-priority pod there, and requires that it runs in place
// of exactly one low pod, which the scheduler preempted.
func preemptionScenario(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	node := "preempt-" + rand.String(5)
	createNodes(t, ctx, localcluster.NodeSpec{Name: node, Labels: map[string]string{"e2e-node": node},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}})
	low, high := priorityClasses(t, ctx)
	for i := 1; i <= 4; i++ {
		pinnedPod(t, ctx, ns, fmt.Sprintf("low-%d", i), node, low)
	}
	waitFor(t, ctx, "four low-priority pods filling the node", func(ctx context.Context) error {
		got, err := runningOn(ctx, ns, node)
		if err != nil {
			return err
		}
		if len(got) != 4 {
			return fmt.Errorf("running: %v", got)
		}
		return nil
	})
	pinnedPod(t, ctx, ns, "high", node, high)
	settle(t, ctx, "the high-priority pod running in place of one low-priority pod", func(ctx context.Context) error {
		got, err := runningOn(ctx, ns, node)
		if err != nil {
			return err
		}
		lows := 0
		for _, name := range got {
			if strings.HasPrefix(name, "low-") {
				lows++
			}
		}
		if len(got) != 4 || lows != 3 || !slices.Contains(got, "high") {
			return fmt.Errorf("running: %v", got)
		}
		return nil
	})
	waitFor(t, ctx, "a Preempted event on one low-priority pod", func(ctx context.Context) error {
		events, err := podEvents(ctx, ns, "Preempted")
		if err != nil {
			return err
		}
		if len(events) != 1 || !strings.HasPrefix(events[0], "low-") || !strings.Contains(events[0], "on node "+node) {
			return fmt.Errorf("Preempted events: %q", events)
		}
		return nil
	})
}

// TestPriorityPreemptionOutsideTheTree: a pod of a namespace no leaf lists
// preempts exactly as DefaultPreemption does, while a tree is in force.
func TestPriorityPreemptionOutsideTheTree(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyTree(t, ctx, []byte(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - {name: elsewhere, namespaces: [not-this-test], max: {cpu: 16}}
`))
	preemptionScenario(t, ctx, ns)
}

// TestPriorityPreemptionInsideOneLeaf: four low-priority pods and a
// high-priority one in a leaf whose quota admits all five (max 16): the high
// pod preempts one of its own leaf for node room.
func TestPriorityPreemptionInsideOneLeaf(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
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
    - {name: team, namespaces: [%s], min: {cpu: 8}, max: {cpu: 16}}
`, ns)))
	preemptionScenario(t, ctx, ns)
}
