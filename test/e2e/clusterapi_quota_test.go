package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// seedLabels are the labels of seed 001's node group; the quota selects the
// compute class.
func seedLabels(zone string) map[string]string {
	return map[string]string{
		"cloud.google.com/compute-class":  "test-capacityquota-class",
		"cloud.google.com/machine-family": "n2",
		"topology.kubernetes.io/zone":     zone,
	}
}

const seedQuotaReason = `exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`

// seedMachineDelay is longer than three of the tests' 1s scan intervals.
const seedMachineDelay = "5s"

// TestClusterAPICapacityQuotaSeed drives shared/scenarios/capacity-quota on
// Cluster API's own controllers, with machines that take longer than three
// scan intervals to provision: spec.replicas runs ahead of the Machines and
// the nodes, and must still never pass what the 8 cpu quota allows (4 nodes
// of 2 cpu), read after every loop and at every change the watch sees.
func TestClusterAPICapacityQuotaSeed(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	e.createGroup(t, ctx, "n2-standard-2", 0, 20, kwokMachine("2", "8Gi", "1930m", seedMachineDelay, seedLabels("us-central1-f")))
	replicas := watchReplicas(t, ctx, e)
	visibility := filepath.Join(t.TempDir(), "visibility.log")
	a := e.startAutoscaler(t, ctx, func(o *config.Options) { o.VisibilityLogFile = visibility })
	applyInNamespace(t, ctx, e.ns, readTestdata(t, "capacity-quota/workload.yaml"))
	waitUnschedulable(t, ctx, e.ns, 16)

	provisioning := runSeedLoops(t, ctx, e, a, 4)
	if provisioning < 3 {
		t.Errorf("only %d loops ran while the machines provisioned, want at least 3", provisioning)
	}
	if got := replicas.highest(); got != 4 {
		t.Errorf("the watch saw spec.replicas reach %d, want 4 at most and at the end", got)
	}
	if diff := cmp.Diff(map[string]int{"n2-standard-2": 4}, e.replicas(t, ctx)); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	wantSeedNodes(t, ctx, 4)
	wantQuotaEventOnPendingPods(t, ctx, e.ns, 1)
	assertVisibilityNoScaleUp(t, visibility, e.groupID("n2-standard-2"), "us-central1-f", seedQuotaReason)
}

// TestClusterAPICapacityQuotaTwoDeployments: the seed's workload on two
// MachineDeployments in two zones under the one quota: together they never
// ask for more than 4 nodes.
func TestClusterAPICapacityQuotaTwoDeployments(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	e.createGroup(t, ctx, "n2-zone-b", 0, 20, kwokMachine("2", "8Gi", "1930m", seedMachineDelay, seedLabels("us-central1-b")))
	e.createGroup(t, ctx, "n2-zone-f", 0, 20, kwokMachine("2", "8Gi", "1930m", seedMachineDelay, seedLabels("us-central1-f")))
	replicas := watchReplicas(t, ctx, e)
	a := e.startAutoscaler(t, ctx, nil)
	applyInNamespace(t, ctx, e.ns, readTestdata(t, "capacity-quota/workload.yaml"))
	waitUnschedulable(t, ctx, e.ns, 16)

	runSeedLoops(t, ctx, e, a, 4)
	if got := replicas.highest(); got != 4 {
		t.Errorf("the watch saw the deployments' replicas add up to %d, want 4 at most and at the end", got)
	}
	wantSeedNodes(t, ctx, 4)
	wantQuotaEventOnPendingPods(t, ctx, e.ns, 2)
}

// runSeedLoops runs a loop every scan interval until 12 pods run and 4 wait,
// and two more loops after that, failing as soon as a loop leaves the
// deployments asking for more than limit nodes. It returns how many loops
// ran while replicas were asked for and no node of the quota had registered.
func runSeedLoops(t *testing.T, ctx context.Context, e *capiEnv, a *app.Autoscaler, limit int) int {
	t.Helper()
	provisioning, settledLoops := 0, 0
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := a.RunOnce(ctx); err != nil {
			return false, err
		}
		total := 0
		for _, r := range e.replicas(t, ctx) {
			total += r
		}
		if total > limit {
			return false, fmt.Errorf("after a loop the deployments ask for %d nodes, more than the quota's %d", total, limit)
		}
		nodes, err := seedNodes(ctx)
		if err != nil {
			return false, err
		}
		if nodes == 0 && total > 0 {
			provisioning++
		}
		if last = wantPhases(e.ns, 12, 4)(ctx); last != nil {
			settledLoops = 0
			return false, nil
		}
		settledLoops++
		return settledLoops >= 3, nil
	})
	if err != nil {
		t.Fatalf("running loops until 12 pods run and 4 wait: %v (last: %v)", err, last)
	}
	return provisioning
}

func seedNodes(ctx context.Context) (int, error) {
	nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "cloud.google.com/compute-class=test-capacityquota-class"})
	if err != nil {
		return 0, err
	}
	return len(nodes.Items), nil
}

func wantSeedNodes(t *testing.T, ctx context.Context, want int) {
	t.Helper()
	if got, err := seedNodes(ctx); err != nil || got != want {
		t.Errorf("%d nodes of the compute class (%v), want %d", got, err, want)
	}
}

// wantQuotaEventOnPendingPods waits for seed 001's event on every pending
// pod, the quota skipping groups node groups.
func wantQuotaEventOnPendingPods(t *testing.T, ctx context.Context, ns string, groups int) {
	t.Helper()
	waitFor(t, ctx, "the NotTriggerScaleUp event on each pending pod", func(ctx context.Context) error {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pending := map[string]bool{}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				pending[p.Name] = false
			}
		}
		msgs, err := podEvents(ctx, ns, "NotTriggerScaleUp")
		if err != nil {
			return err
		}
		for _, m := range msgs {
			name, msg, _ := strings.Cut(m, ": ")
			if _, ok := pending[name]; ok && msg == fmt.Sprintf("pod didn't trigger scale-up: %d %s", groups, seedQuotaReason) {
				pending[name] = true
			}
		}
		for name, ok := range pending {
			if !ok {
				return fmt.Errorf("pod %s has no event %q; events: %q", name, seedQuotaReason, msgs)
			}
		}
		return nil
	})
}

// TestClusterAPIReplicasAheadOfMachines is the reported overshoot: six
// pending pods of 3500m for 4 cpu machines, a CapacityQuota of 8 cpu on the
// group's label, machines slower than several loops. Each loop places the
// pods it can on the nodes asked for; the rest ask again, and the replicas
// that are no Machines yet must count against the quota, or every loop adds
// two more.
func TestClusterAPIReplicasAheadOfMachines(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-capi-pool}
spec:
  selector: {matchLabels: {e2e-capi-pool: big}}
  limits: {resources: {cpu: 8}}
`))
	e.createGroup(t, ctx, "big", 0, 10, kwokMachine("4", "16Gi", "", "6s", map[string]string{"e2e-capi-pool": "big"}))
	replicas := watchReplicas(t, ctx, e)
	a := e.startAutoscaler(t, ctx, nil)
	createPods(t, ctx, e.ns, "big", 6, "3500m", map[string]string{"e2e-capi-pool": "big"})
	waitUnschedulable(t, ctx, e.ns, 6)
	loops := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := a.RunOnce(ctx); err != nil {
			return false, err
		}
		loops++
		if r := e.replicas(t, ctx)["big"]; r > 2 {
			return false, fmt.Errorf("loop %d: spec.replicas %d, the quota allows 2", loops, r)
		}
		got, err := runningPerNamespace(ctx, []string{e.ns})
		return err == nil && got[0] == 2 && loops >= 5, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := replicas.highest(); got != 2 {
		t.Errorf("the watch saw spec.replicas reach %d, want 2", got)
	}
	wantPodEvent(t, ctx, e.ns, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/e2e-capi-pool", resources: cpu`)
}
