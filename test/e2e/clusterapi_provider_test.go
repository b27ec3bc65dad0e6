package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

// loopUntil runs a loop every second until cond holds, failing on a loop's
// error or on check's, which runs after every loop.
func loopUntil(t *testing.T, ctx context.Context, a *app.Autoscaler, what string, check, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := a.RunOnce(ctx); err != nil {
			return false, err
		}
		if check != nil {
			if err := check(ctx); err != nil {
				return false, err
			}
		}
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("running loops until %s: %v (last: %v)", what, err, last)
	}
}

func runningPods(ns string, want int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		got, err := runningPerNamespace(ctx, []string{ns})
		if err != nil {
			return err
		}
		if got[0] != want {
			return fmt.Errorf("%d pods running, want %d", got[0], want)
		}
		return nil
	}
}

// TestClusterAPIScaleFromZeroInfrastructureCapacity: a MachineDeployment at
// zero replicas with no capacity annotation at all scales from what its
// infrastructure machine template reports in status.capacity (4 cpu: two
// 1500m pods a node), through the scale subresource.
func TestClusterAPIScaleFromZeroInfrastructureCapacity(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	e.createGroup(t, ctx, "from-zero", 0, 5, kwokMachine("4", "16Gi", "", "1s", nil))
	md, err := e.dynamic.Resource(capiMachineDeployments).Namespace(e.ns).Get(ctx, "from-zero", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range md.GetAnnotations() {
		if strings.HasPrefix(k, clusterapi.CapacityAnnotationPrefix) {
			t.Fatalf("the deployment carries %s; this test needs none", k)
		}
	}
	a := e.startAutoscaler(t, ctx, nil)
	createPods(t, ctx, e.ns, "work", 6, "1500m", nil)
	waitUnschedulable(t, ctx, e.ns, 6)
	loopUntil(t, ctx, a, "6 pods run", nil, runningPods(e.ns, 6))
	if diff := cmp.Diff(map[string]int{"from-zero": 3}, e.replicas(t, ctx)); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	md, err = e.dynamic.Resource(capiMachineDeployments).Namespace(e.ns).Get(ctx, "from-zero", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	viaScale := false
	for _, mf := range md.GetManagedFields() {
		viaScale = viaScale || (mf.Manager == clusterapi.FieldManager && mf.Subresource == "scale")
	}
	if !viaScale {
		t.Errorf("spec.replicas was not written by %s through the scale subresource: %+v", clusterapi.FieldManager, md.GetManagedFields())
	}
}

// TestClusterAPIScaleDownRemovesTheChosenMachine: of three machines, the one
// whose node is empty is the one the autoscaler removes, and Cluster API
// deletes exactly that Machine: the delete-machine annotation goes on before
// the replicas drop (without it, a MachineSet deletes a machine of its own
// choosing).
func TestClusterAPIScaleDownRemovesTheChosenMachine(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	_, err := e.capi.CreateMachineDeployment(ctx, localcluster.MachineDeploymentGroup{Namespace: e.ns, Name: "shrink", ClusterName: e.cluster,
		MinSize: 0, MaxSize: 5, Replicas: ptr.To[int32](3), Machine: kwokMachine("4", "16Gi", "", "", map[string]string{"e2e-shrink": "yes"})})
	if err != nil {
		t.Fatal(err)
	}
	var machines []machineInfo
	waitFor(t, ctx, "three machines with nodes", func(ctx context.Context) error {
		machines = e.machines(t, ctx)
		for _, m := range machines {
			if m.node == "" {
				return fmt.Errorf("machine %s has no node", m.name)
			}
		}
		if len(machines) != 3 {
			return fmt.Errorf("%d machines", len(machines))
		}
		return nil
	})
	// Pods that cannot move keep the first two nodes; the third is empty.
	busy, empty := machines[:2], machines[2]
	uids := map[string]types.UID{}
	for i, m := range busy {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pinned-%d", i), Namespace: e.ns},
			Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{corev1.LabelHostname: m.node},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}},
			},
		}
		created, err := cluster.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[created.Name] = created.UID
	}
	waitFor(t, ctx, "the pinned pods running", runningPods(e.ns, 2))
	a := e.startAutoscaler(t, ctx, func(o *config.Options) {
		o.ScaleDownUnneededTime = 2 * time.Second
		o.ScaleDownDelayAfterAdd = 0
		o.MaxGracefulTerminationSec = 2
	})
	busyKept := func(ctx context.Context) error {
		present := map[string]bool{}
		for _, m := range e.machines(t, ctx) {
			present[m.name] = !m.deleting
		}
		for _, m := range busy {
			if !present[m.name] {
				return fmt.Errorf("machine %s of a busy node is gone or going", m.name)
			}
		}
		return nil
	}
	loopUntil(t, ctx, a, "the empty node's machine is gone", busyKept, func(ctx context.Context) error {
		var names []string
		for _, m := range e.machines(t, ctx) {
			names = append(names, m.name)
		}
		if want := []string{busy[0].name, busy[1].name}; !cmp.Equal(want, names) {
			return fmt.Errorf("machines %v, want %v", names, want)
		}
		return nil
	})
	if diff := cmp.Diff(map[string]int{"shrink": 2}, e.replicas(t, ctx)); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	waitFor(t, ctx, "the empty node deleted", func(ctx context.Context) error {
		if _, err := cluster.Client.CoreV1().Nodes().Get(ctx, empty.node, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("node %s still exists", empty.node)
		}
		return nil
	})
	for name, uid := range uids {
		pod, err := cluster.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.UID != uid || pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s was disturbed: %v %+v", name, err, pod.Status.Phase)
		}
	}
}

// TestClusterAPIFailedMachine: machines of the first group fail to
// provision (out of resources). Until they are deleted they hold the 8 cpu
// quota's headroom, so the second group under the same quota grows only
// after; the failing group backs off with Cluster API's failure reason.
func TestClusterAPIFailedMachine(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-capi-failing}
spec:
  selector: {matchLabels: {e2e-capi-failing: q}}
  limits: {resources: {cpu: 8}}
`))
	labels := map[string]string{"e2e-capi-failing": "q"}
	failing := kwokMachine("4", "16Gi", "", "2s", labels)
	failing.Failure = &localcluster.KwokFailure{OutOfResources: true, Code: "STOCKOUT", Message: "no machines left in the zone"}
	e.createGroup(t, ctx, "a-failing", 0, 5, failing)
	e.createGroup(t, ctx, "b-healthy", 0, 5, kwokMachine("4", "16Gi", "", "2s", labels))
	a := e.startAutoscaler(t, ctx, func(o *config.Options) {
		o.InitialNodeGroupBackoffDuration = time.Minute
		o.MaxNodeGroupBackoffDuration = time.Minute
	})
	createPods(t, ctx, e.ns, "work", 2, "3", labels)
	waitUnschedulable(t, ctx, e.ns, 2)
	if err := a.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"a-failing": 2, "b-healthy": 0}, e.replicas(t, ctx)); diff != "" {
		t.Fatalf("the tie goes to the first group (-want +got):\n%s", diff)
	}
	sawFailed := false
	// Each group holds the larger of its replicas and its machines not being
	// deleted: together never more than the quota's 2 nodes.
	held := func(ctx context.Context) error {
		replicas := e.replicas(t, ctx)
		live := map[string]int{}
		for _, m := range e.machines(t, ctx) {
			if !m.deleting {
				live[m.deployment]++
			}
			sawFailed = sawFailed || m.failed
		}
		total := 0
		for name, r := range replicas {
			total += max(r, live[name])
		}
		if total > 2 {
			return fmt.Errorf("the groups hold %d nodes (replicas %v, machines %v), the quota allows 2", total, replicas, live)
		}
		return nil
	}
	loopUntil(t, ctx, a, "both pods run on the healthy group", held, runningPods(e.ns, 2))
	if !sawFailed {
		t.Errorf("no loop saw a failed machine")
	}
	if diff := cmp.Diff(map[string]int{"a-failing": 0, "b-healthy": 2}, e.replicas(t, ctx)); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	failingStatus := groupStatus(t, ctx, e.groupID("a-failing"))
	want := api.BackoffInfo{ErrorCode: "InsufficientResourcesMachineError",
		ErrorMessage: `Failure detected from referenced resource infrastructure.cluster.x-k8s.io/v1alpha1, Kind=KwokMachine with name "`}
	if failingStatus.ScaleUp.Status != api.Backoff ||
		failingStatus.ScaleUp.BackoffInfo.ErrorCode != want.ErrorCode ||
		!strings.HasPrefix(failingStatus.ScaleUp.BackoffInfo.ErrorMessage, want.ErrorMessage) ||
		!strings.HasSuffix(failingStatus.ScaleUp.BackoffInfo.ErrorMessage, "STOCKOUT: no machines left in the zone") {
		t.Errorf("status of the failing group %+v, want Backoff with %+v... STOCKOUT", failingStatus, want)
	}
}

// TestClusterAPIMachinePool: a MachinePool is a node group. Its instances
// are what its infrastructure pool lists in spec.providerIDList; its
// replicas count against the quota before the pool has made them, as a
// MachineDeployment's do.
func TestClusterAPIMachinePool(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-capi-machinepool}
spec:
  selector: {matchLabels: {e2e-capi-pool: mp}}
  limits: {resources: {cpu: 8}}
`))
	labels := map[string]string{"e2e-capi-pool": "mp"}
	_, err := e.capi.CreateMachinePool(ctx, localcluster.MachineDeploymentGroup{Namespace: e.ns, Name: "mp", ClusterName: e.cluster,
		MinSize: 0, MaxSize: 5, Machine: kwokMachine("4", "16Gi", "", "4s", labels)})
	if err != nil {
		t.Fatal(err)
	}
	// Every event is sent: upstream's default spam filter lets one
	// NotTriggerScaleUp through per pod every 5 minutes, so the quota's reason,
	// which replaces an earlier one once two nodes are up, would be dropped.
	a := e.startAutoscaler(t, ctx, func(o *config.Options) { o.RecordDuplicatedEvents = true })
	createPods(t, ctx, e.ns, "pool", 6, "3", labels)
	waitUnschedulable(t, ctx, e.ns, 6)
	within := func(ctx context.Context) error {
		if r := e.poolReplicas(t, ctx); r > 2 {
			return fmt.Errorf("MachinePool spec.replicas %d, the quota allows 2", r)
		}
		return nil
	}
	loopUntil(t, ctx, a, "two pods run on the pool's nodes", within, runningPods(e.ns, 2))
	pool, err := e.dynamic.Resource(capiMachinePools).Namespace(e.ns).Get(ctx, "mp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "providerIDList")
	if len(ids) != 2 {
		t.Errorf("providerIDList %v, want two instances", ids)
	}
	wantPodEvent(t, ctx, e.ns, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/e2e-capi-machinepool", resources: cpu`)
}
