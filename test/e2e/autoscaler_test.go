package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// testAutoscaler is an autoscaler whose loops the test runs one at a time, on the
// shared cluster, with a kwok cloud of the test's own.
type testAutoscaler struct {
	*app.Autoscaler
	cloud *kwokCloudEnv
	opts  config.Options
}

func startAutoscaler(t *testing.T, ctx context.Context, kwokConfig string, tweak func(*config.Options)) *testAutoscaler {
	t.Helper()
	cloud := startKwokCloud(t, ctx, kwokConfig)
	opts := config.Defaults()
	// The local cluster's scheduler enforces the tree as default-scheduler.
	opts.ElasticQuotaSchedulerNames = []string{corev1.DefaultSchedulerName}
	opts.CloudProviderName = kwok.ProviderName
	opts.CloudConfig = "configmap:kube-system/" + cloud.configName
	opts.KwokState = "kube-system/" + cloud.stateName
	opts.LeaderElect = false
	opts.ScanInterval = time.Second
	opts.VisibilityLogFile = filepath.Join(t.TempDir(), "visibility.log")
	if tweak != nil {
		tweak(&opts)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	a, err := app.New(runCtx, opts, cluster.Config, app.NewProcess(opts))
	if err != nil {
		t.Fatal(err)
	}
	return &testAutoscaler{Autoscaler: a, cloud: cloud, opts: opts}
}

// loop runs one autoscaler loop.
func (a *testAutoscaler) loop(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := a.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
}

// targets reads every group's target size from the cloud's point of view.
func (a *testAutoscaler) targets(t *testing.T) map[string]int {
	t.Helper()
	p := a.cloud.newProvider()
	out := map[string]int{}
	for _, g := range p.NodeGroups() {
		n, err := g.TargetSize()
		if err != nil {
			t.Fatal(err)
		}
		out[g.Id()] = n
	}
	return out
}

// createPods creates n bare pods requesting cpu, with optional node selector.
func createPods(t *testing.T, ctx context.Context, ns, prefix string, n int, cpu string, selector map[string]string) {
	t.Helper()
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns, Labels: map[string]string{"app": prefix}},
			Spec: corev1.PodSpec{
				NodeSelector:                  selector,
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				}},
			},
		}
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitUnschedulable waits until the scheduler marked n pods of ns Unschedulable.
func waitUnschedulable(t *testing.T, ctx context.Context, ns string, n int) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%d pods marked Unschedulable", n), func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					got++
				}
			}
		}
		if got != n {
			return fmt.Errorf("%d of %d pods unschedulable", got, n)
		}
		return nil
	})
}

// podEvents returns the messages of events with reason on pods of ns.
func podEvents(ctx context.Context, ns, reason string) ([]string, error) {
	events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range events.Items {
		out = append(out, e.InvolvedObject.Name+": "+e.Message)
	}
	return out, nil
}

const fourCPUGroup = `
nodeGroups:
- name: e2e-kwok-4cpu
  minSize: 0
  maxSize: 10
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 2s
`

// TestAutoscalerScalesUpForPendingPods: 12 pending 1-cpu pods, nodes of 4
// allocatable cpu: exactly 3 nodes, and a loop during provisioning asks for
// nothing more.
func TestAutoscalerScalesUpForPendingPods(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, fourCPUGroup, nil)
	createPods(t, ctx, ns, "work", 12, "1", nil)
	waitUnschedulable(t, ctx, ns, 12)

	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 3}, a.targets(t)); diff != "" {
		t.Fatalf("targets after the first loop (-want +got):\n%s", diff)
	}
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 3}, a.targets(t)); diff != "" {
		t.Fatalf("a loop during provisioning changed the targets (-want +got):\n%s", diff)
	}
	waitFor(t, ctx, "all 12 pods running", func(ctx context.Context) error {
		got, err := runningPerNamespace(ctx, []string{ns})
		if err != nil {
			return err
		}
		if got[0] != 12 {
			return fmt.Errorf("%d running", got[0])
		}
		return nil
	})
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-4cpu": 3}, a.targets(t)); diff != "" {
		t.Fatalf("targets once everything runs (-want +got):\n%s", diff)
	}
	waitFor(t, ctx, "TriggeredScaleUp events", func(ctx context.Context) error {
		msgs, err := podEvents(ctx, ns, "TriggeredScaleUp")
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if strings.HasSuffix(m, "pod triggered scale-up: [{e2e-kwok-4cpu 0->3 (max: 10)}]") {
				return nil
			}
		}
		return fmt.Errorf("events: %q", msgs)
	})
}

const twoPools = `
nodeGroups:
- name: e2e-kwok-pool-a
  minSize: 0
  maxSize: 5
  labels: {pool: a}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
- name: e2e-kwok-pool-b
  minSize: 0
  maxSize: 5
  labels: {pool: b}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
`

// TestAutoscalerRespectsPredicates: a pod that only one group's labels satisfy
// grows only that group; a pod no group satisfies says why, per reason.
func TestAutoscalerRespectsPredicates(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, twoPools, nil)
	createPods(t, ctx, ns, "wants-b", 1, "1", map[string]string{"pool": "b"})
	createPods(t, ctx, ns, "wants-c", 1, "1", map[string]string{"pool": "c"})
	waitUnschedulable(t, ctx, ns, 2)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-pool-a": 0, "e2e-kwok-pool-b": 1}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	waitFor(t, ctx, "a NotTriggerScaleUp event on the pod no group fits", func(ctx context.Context) error {
		msgs, err := podEvents(ctx, ns, "NotTriggerScaleUp")
		if err != nil {
			return err
		}
		want := "wants-c-0: pod didn't trigger scale-up: 2 node(s) didn't match Pod's node affinity/selector"
		for _, m := range msgs {
			if m == want {
				return nil
			}
		}
		return fmt.Errorf("want %q among %q", want, msgs)
	})
}

const failingA = `
nodeGroups:
- name: e2e-kwok-fail-a
  minSize: 0
  maxSize: 5
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
  failures: {outOfResources: true, errorCode: ZONE_RESOURCE_POOL_EXHAUSTED, message: "no capacity left in the zone"}
- name: e2e-kwok-fail-b
  minSize: 0
  maxSize: 5
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: 1s
`

// TestAutoscalerBacksOffFailingGroup: group A's instances fail; the next loop
// grows B, and the status ConfigMap shows A in backoff with the error.
func TestAutoscalerBacksOffFailingGroup(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	a := startAutoscaler(t, ctx, failingA, nil)
	createPods(t, ctx, ns, "work", 2, "1", nil)
	waitUnschedulable(t, ctx, ns, 2)
	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-fail-a": 1, "e2e-kwok-fail-b": 0}, a.targets(t)); diff != "" {
		t.Fatalf("the tie goes to A first (-want +got):\n%s", diff)
	}
	waitFor(t, ctx, "a loop that sees A's failure and grows B", func(ctx context.Context) error {
		a.loop(t, ctx)
		if got := a.targets(t)["e2e-kwok-fail-b"]; got != 1 {
			return fmt.Errorf("B's target is %d", got)
		}
		return nil
	})
	// The loop that sees the failure writes A Unhealthy, as upstream's: its
	// health is taken at the loop's start, when A's target still counts the
	// failed instance, which that loop then removes. From the next loop A is
	// at target 0 and backed off.
	want := api.BackoffInfo{ErrorCode: "ZONE_RESOURCE_POOL_EXHAUSTED", ErrorMessage: "no capacity left in the zone"}
	waitFor(t, ctx, "group A in backoff on the status ConfigMap", func(ctx context.Context) error {
		a.loop(t, ctx)
		groupA := groupStatus(t, ctx, "e2e-kwok-fail-a")
		if groupA.ScaleUp.Status != api.Backoff || groupA.ScaleUp.BackoffInfo != want {
			return fmt.Errorf("group A scale-up status %+v, want Backoff with %+v", groupA.ScaleUp, want)
		}
		return nil
	})
	waitFor(t, ctx, "both pods running on B's nodes", func(ctx context.Context) error {
		got, err := runningPerNamespace(ctx, []string{ns})
		if err != nil {
			return err
		}
		if got[0] != 2 {
			return fmt.Errorf("%d running", got[0])
		}
		return nil
	})
}

// groupStatus reads a node group's entry of the status ConfigMap.
func groupStatus(t *testing.T, ctx context.Context, group string) *api.NodeGroupStatus {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, api.StatusConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status, err := api.ParseStatus(cm.Data[api.StatusConfigMapKey])
	if err != nil {
		t.Fatal(err)
	}
	for i := range status.NodeGroups {
		if status.NodeGroups[i].Name == group {
			return &status.NodeGroups[i]
		}
	}
	t.Fatalf("no status for node group %s in %+v", group, status)
	return nil
}
