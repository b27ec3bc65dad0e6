package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// keepFinalizer keeps a reclaim's victims terminating until the test lets them go.
const keepFinalizer = "e2e.quotascale.io/keep"

// TestElasticQuotaExpiredHoldRequeuesKeptOutPod (issue 25): a reclaim holds
// the quota it frees for its preemptor; when the preemptor cannot be placed
// (its node is cordoned here) the hold expires, and a pod only the hold kept
// out is scheduled at its next retry, not at the queue's periodic flush of
// unschedulable pods five minutes later. The scheduler runs with upstream's
// default podMaxInUnschedulablePodsDuration (5m), a 15s hold, and a tree
// status interval long enough that no status write (a tree event, which
// requeues every pod the plugin refused) happens while the test runs: the
// expiry itself must wake the pod.
func TestElasticQuotaExpiredHoldRequeuesKeptOutPod(t *testing.T) {
	ctx := testContext(t)
	a, b := createNamespace(t, ctx, ""), createNamespace(t, ctx, "")
	eight := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}
	createNodes(t, ctx,
		localcluster.NodeSpec{Name: "hold-1", Capacity: eight, Labels: map[string]string{"e2e-node": "hold-1"}},
		localcluster.NodeSpec{Name: "hold-2", Capacity: eight, Labels: map[string]string{"e2e-node": "hold-2"}})
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
    - {name: hold-a, namespaces: [%s], min: {cpu: 4}, max: {cpu: 8}}
    - {name: hold-b, namespaces: [%s], min: {cpu: 4}, max: {cpu: 8}}
`, a, b)))
	const hold = 15 * time.Second
	restartSchedulerWithArgs(t, ctx, fmt.Sprintf(`{"reclaimHoldDuration":%q,"statusUpdateInterval":"10m"}`, hold))
	t.Cleanup(func() { releaseKept(t, b) })

	// hold-b borrows 4 of hold-a's min on hold-1.
	for i := range 4 {
		createHoldPod(t, ctx, b, fmt.Sprintf("borrower-%d", i), "hold-1", "2", true)
	}
	settle(t, ctx, "hold-b running 8 cpu", wantRunning([]string{a, b}, []int{0, 4}))
	expired := func() float64 {
		return gatheredCounter(t, legacyregistry.DefaultGatherer, "quotascale_elastic_quota_reclaims_total", map[string]string{"quota_node": "hold-a", "result": "expired"})
	}
	expiredBefore := expired()

	// The preemptor reclaims hold-a's min: two victims, kept terminating.
	createHoldPod(t, ctx, a, "preemptor", "hold-1", "4", false)
	waitFor(t, ctx, "two victims being deleted", func(ctx context.Context) error {
		if n := len(terminating(t, ctx, b)); n != 2 {
			return fmt.Errorf("%d pods of hold-b being deleted", n)
		}
		return nil
	})
	// The preemptor's node goes away before the victims are gone: it cannot
	// be placed, and its hold stands until it expires.
	if _, err := cluster.Client.CoreV1().Nodes().Patch(ctx, "hold-1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range terminating(t, ctx, b) {
		dropFinalizer(t, ctx, b, name)
	}
	waitFor(t, ctx, "the victims gone", wantPhases(b, 2, 0))
	settle(t, ctx, "the preemptor pending", wantPhases(a, 0, 1))

	// Quota came free on hold-b's side only for the hold: root is at 4 of
	// hold-b's plus the 4 held.
	createHoldPod(t, ctx, b, "kept-out", "hold-2", "2", false)
	waitFor(t, ctx, "the hold to refuse kept-out", func(ctx context.Context) error {
		pod, err := cluster.Client.CoreV1().Pods(b).Get(ctx, "kept-out", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, `exceeded elastic quota "root"`) {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", pod.Status.Conditions)
	})
	if expired() != expiredBefore {
		t.Fatal("the hold expired before it refused kept-out: the test cannot tell what woke the pod; lengthen the hold")
	}

	var expiredAt time.Time
	waitFor(t, ctx, "the hold to expire", func(context.Context) error {
		if expired() == expiredBefore {
			return fmt.Errorf("no expired hold yet")
		}
		expiredAt = time.Now()
		return nil
	})
	// A generous bound: one retry takes a second; the flush waits 5 minutes.
	const bound = time.Minute
	var boundAt time.Time
	err := wait.PollUntilContextTimeout(ctx, pollInterval, 2*bound, true, func(ctx context.Context) (bool, error) {
		pod, err := cluster.Client.CoreV1().Pods(b).Get(ctx, "kept-out", metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName == "" {
			return false, nil
		}
		boundAt = time.Now()
		return true, nil
	})
	if err != nil {
		t.Fatalf("kept-out not scheduled within %s of the hold's expiry: %v", 2*bound, err)
	}
	took := boundAt.Sub(expiredAt)
	t.Logf("kept-out scheduled %s after the hold expired", took.Round(time.Millisecond))
	if took > bound {
		t.Errorf("kept-out scheduled %s after the hold expired, want under %s", took, bound)
	}
}

// restartSchedulerWithArgs restarts the scheduler with CapacityScheduling's
// pluginConfig args, and restores the default scheduler when the test ends.
func restartSchedulerWithArgs(t *testing.T, ctx context.Context, args string) {
	t.Helper()
	profile := localcluster.QuotaProfile()
	profile.PluginConfig = []configv1.PluginConfig{{Name: capacityscheduling.Name, Args: runtime.RawExtension{Raw: []byte(args)}}}
	if err := cluster.StartScheduler(ctx, localcluster.SchedulerOptions{Config: &configv1.KubeSchedulerConfiguration{Profiles: []configv1.KubeSchedulerProfile{profile}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.StartScheduler(context.Background(), localcluster.SchedulerOptions{}); err != nil {
			t.Errorf("restoring the default scheduler: %v", err)
		}
	})
}

// createHoldPod creates a bare pod requesting cpu, pinned to node, carrying
// keepFinalizer if keep.
func createHoldPod(t *testing.T, ctx context.Context, ns, name, node, cpu string, keep bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"e2e-node": node},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		},
	}
	if keep {
		pod.Finalizers = []string{keepFinalizer}
	}
	if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// terminating lists the pods of ns being deleted.
func terminating(t *testing.T, ctx context.Context, ns string) []string {
	t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			out = append(out, p.Name)
		}
	}
	return out
}

func dropFinalizer(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if _, err := cluster.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("releasing pod %s/%s: %v", ns, name, err)
	}
}

// releaseKept drops keepFinalizer from every pod of ns, so that the namespace
// can go.
func releaseKept(t *testing.T, ns string) {
	ctx := context.Background()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the pods of %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		if len(p.Finalizers) > 0 {
			dropFinalizer(t, ctx, ns, p.Name)
		}
	}
}
