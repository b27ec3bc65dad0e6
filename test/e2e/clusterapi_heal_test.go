package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

// TestClusterAPITargetAheadOfMachinesIsLowered (issue 25, item 1): a
// MachineDeployment whose MachineSet cannot create Machines (its
// infrastructure template is gone) is scaled up by the autoscaler, which
// least-waste prefers. Its replica never becomes a Machine, so it stays
// upcoming: the pending pod "fits" on it and it holds half of the
// CapacityQuota. After --max-node-provision-time the loop lowers the target,
// as upstream's fixNodeGroupSize, the upcoming node and the quota headroom
// come back, and the other group, whose 8-cpu node needs the whole quota, is
// scaled up for the pod.
func TestClusterAPITargetAheadOfMachinesIsLowered(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	applyCapacityQuotas(t, ctx, []byte(`
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-capi-heal}
spec:
  selector: {matchLabels: {e2e-capi-heal: pool}}
  limits: {resources: {cpu: 8}}
`))
	labels := map[string]string{"e2e-capi-heal": "pool"}
	_, err := e.capi.CreateMachineDeployment(ctx, localcluster.MachineDeploymentGroup{
		Namespace: e.ns, Name: "blocked", ClusterName: e.cluster, MinSize: 0, MaxSize: 3,
		Machine:          kwokMachine("4", "16Gi", "", "", labels),
		ExtraAnnotations: map[string]string{clusterapi.CPUAnnotation: "4", clusterapi.MemoryAnnotation: "16Gi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Without its infrastructure template the MachineSet cannot create a
	// Machine; the capacity annotations still describe the group.
	if err := e.dynamic.Resource(localcluster.KwokMachineTemplates).Namespace(e.ns).Delete(ctx, "blocked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createGroup(t, ctx, "good", 0, 3, kwokMachine("8", "16Gi", "", "", labels))
	const provisionTime = 5 * time.Second
	a := e.startAutoscaler(t, ctx, func(o *config.Options) { o.MaxNodeProvisionTime = provisionTime })
	createPods(t, ctx, e.ns, "heal", 1, "3500m", labels)
	waitUnschedulable(t, ctx, e.ns, 1)

	blockedUp, lowered := time.Time{}, false
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := a.RunOnce(ctx); err != nil {
			return false, err
		}
		r := e.replicas(t, ctx)
		switch {
		case r["blocked"] > 0 && blockedUp.IsZero():
			blockedUp = time.Now()
		case r["blocked"] == 0 && !blockedUp.IsZero():
			lowered = true
		}
		if r["good"] > 0 && !lowered {
			return false, fmt.Errorf("replicas %v: the other group was scaled up before the blocked target was lowered (blocked scaled up: %v)", r, !blockedUp.IsZero())
		}
		if r["blocked"] > 0 && r["good"] > 0 {
			return false, fmt.Errorf("replicas %v: both groups hold the quota", r)
		}
		got, err := runningPerNamespace(ctx, []string{e.ns})
		return err == nil && got[0] == 1, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !lowered {
		t.Fatal("the pod runs, but the blocked group was never scaled up and lowered")
	}
	if r := e.replicas(t, ctx); r["blocked"] != 0 || r["good"] != 1 {
		t.Errorf("replicas %v, want blocked 0 and good 1", r)
	}
	for _, m := range e.machines(t, ctx) {
		if m.deployment == "blocked" {
			t.Errorf("the blocked group has machine %s", m.name)
		}
	}
}
