package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

// The autoscaler's scale-up simulation sees the devices of nodes that do not
// exist yet: a group's template carries the ResourceSlices its nodes will
// publish, the DynamicResources plugin allocates the pending pods' claims on
// them, and a device taken by one simulated pod is not given to the next.
// test/oracle judges every node against the CapacityQuotas from the
// ResourceSlices and the claims' allocation results.

// draQuotaGroup has two devices of its own driver per node; its label is
// what draDeviceQuota selects. Nodes take a while to register, so that the
// loops below see them as upcoming first.
const draQuotaGroup = `
nodeGroups:
- name: e2e-kwok-dra-quota
  minSize: 0
  maxSize: 6
  labels: {e2e.quotascale.io/dra: quota}
  capacity: {cpu: "16", memory: 64Gi}
  provisioningDelay: 2s
  devices:
  - driver: dra-quota.example.com
    count: 2
`

// draDeviceQuota allows four devices of class gpu.example.com on the group's
// nodes: two nodes.
const draDeviceQuota = `
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-dra-devices}
spec:
  selector: {matchLabels: {e2e.quotascale.io/dra: quota}}
  limits: {resources: {gpu.example.com.deviceclass.resource.k8s.io/devices: 4}}
`

const draDeviceQuotaReason = `exceeded quota: "CapacityQuota/e2e-dra-devices", resources: gpu.example.com.deviceclass.resource.k8s.io/devices`

// TestDRAScaleUpCapacityQuotaCountsDevices: five pods with a one-device claim
// each, a group with two devices per node, a CapacityQuota of four devices.
// The autoscaler adds exactly two nodes; four pods run, the fifth waits with
// the exceeded-quota reason naming the device-class resource, in its event and
// in the visibility log.
func TestDRAScaleUpCapacityQuotaCountsDevices(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	createDeviceClass(t, ctx, "gpu.example.com", "dra-quota.example.com")
	createClaimTemplate(t, ctx, ns, "one-gpu", "gpu.example.com")
	applyCapacityQuotas(t, ctx, []byte(draDeviceQuota))
	visibility := ""
	a := startAutoscaler(t, ctx, draQuotaGroup, func(o *config.Options) { visibility = o.VisibilityLogFile })
	createClaimPods(t, ctx, ns, "gpu", 5, "one-gpu")
	waitUnschedulable(t, ctx, ns, 5)

	want := map[string]int{"e2e-kwok-dra-quota": 2}
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("targets after the first loop (-want +got):\n%s", diff)
	}
	// Loops while the nodes provision count their devices as upcoming.
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("a loop during provisioning went past the quota (-want +got):\n%s", diff)
	}
	settle(t, ctx, "4 pods running, 1 pending", wantPhases(ns, 4, 1))
	waitFor(t, ctx, "two pods and two devices on each node", func(ctx context.Context) error {
		pods, devices, err := claimPlacement(ctx, ns)
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]int{2, 2}, sortedCounts(pods)); diff != "" {
			return fmt.Errorf("pods per node (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{2, 2}, sortedCounts(devices)); diff != "" {
			return fmt.Errorf("devices per node (-want +got):\n%s", diff)
		}
		return nil
	})
	waitUnschedulable(t, ctx, ns, 1)
	a.loop(t, ctx)
	if diff := cmp.Diff(want, a.targets(t)); diff != "" {
		t.Fatalf("targets once the nodes registered (-want +got):\n%s", diff)
	}
	wantPodEvent(t, ctx, ns, "pod didn't trigger scale-up: 1 "+draDeviceQuotaReason)
	assertVisibilityNoScaleUp(t, visibility, "e2e-kwok-dra-quota", "", draDeviceQuotaReason)
}

// draZeroGroup declares its devices only in its config: it has no node to
// copy slices from.
const draZeroGroup = `
nodeGroups:
- name: e2e-kwok-dra-zero
  minSize: 0
  maxSize: 6
  capacity: {cpu: "16", memory: 64Gi}
  devices:
  - driver: dra-zero.example.com
    count: 2
`

// TestDRAScaleUpFromZero: a group without nodes whose config declares two
// devices per node. Three pods with a one-device claim each need two nodes;
// they get them in one loop, and run with their claims allocated there.
func TestDRAScaleUpFromZero(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	createDeviceClass(t, ctx, "gpu-zero.example.com", "dra-zero.example.com")
	createClaimTemplate(t, ctx, ns, "one-gpu", "gpu-zero.example.com")
	a := startAutoscaler(t, ctx, draZeroGroup, nil)
	createClaimPods(t, ctx, ns, "gpu", 3, "one-gpu")
	waitUnschedulable(t, ctx, ns, 3)

	a.loop(t, ctx)
	if diff := cmp.Diff(map[string]int{"e2e-kwok-dra-zero": 2}, a.targets(t)); diff != "" {
		t.Fatalf("targets after the first loop (-want +got):\n%s", diff)
	}
	settle(t, ctx, "3 pods running", wantPhases(ns, 3, 0))
	waitFor(t, ctx, "the claims allocated on the new nodes", func(ctx context.Context) error {
		pods, devices, err := claimPlacement(ctx, ns)
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]int{1, 2}, sortedCounts(pods)); diff != "" {
			return fmt.Errorf("pods per node (-want +got):\n%s", diff)
		}
		for node := range devices {
			if !strings.HasPrefix(node, "e2e-kwok-dra-zero-") {
				return fmt.Errorf("a device of node %s", node)
			}
		}
		return nil
	})
	nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, "e2e-kwok-dra-zero-") {
			got++
		}
	}
	if got != 2 {
		t.Errorf("%d nodes of the group, want 2", got)
	}
}

// draCAPIQuota allows two devices of class gpu-capi.example.com on the nodes
// labelled for TestClusterAPIDRADriverScaleFromZero: one of its nodes.
const draCAPIQuota = `
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityQuota
metadata: {name: e2e-dra-capi-devices}
spec:
  selector: {matchLabels: {e2e.quotascale.io/dra: capi}}
  limits: {resources: {gpu-capi.example.com.deviceclass.resource.k8s.io/devices: 2}}
`

// TestClusterAPIDRADriverScaleFromZero: a MachineDeployment at zero whose
// GPUs are described only by upstream's dra-driver and gpu-count capacity
// annotations (two per node). Three pods with a one-device claim each would
// need two nodes; a CapacityQuota of two devices of the class lets the
// autoscaler ask for one, and the pods it leaves out name the quota. The
// machines take an hour, so the test reads the decision, not the nodes.
func TestClusterAPIDRADriverScaleFromZero(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	createDeviceClass(t, ctx, "gpu-capi.example.com", "dra-capi.example.com")
	createClaimTemplate(t, ctx, e.ns, "one-gpu", "gpu-capi.example.com")
	applyCapacityQuotas(t, ctx, []byte(draCAPIQuota))
	_, err := e.capi.CreateMachineDeployment(ctx, localcluster.MachineDeploymentGroup{
		Namespace: e.ns, Name: "gpu", ClusterName: e.cluster, MinSize: 0, MaxSize: 4,
		Machine: kwokMachine("16", "64Gi", "", "1h", map[string]string{"e2e.quotascale.io/dra": "capi"}),
		ExtraAnnotations: map[string]string{
			clusterapi.CPUAnnotation: "16", clusterapi.MemoryAnnotation: "64Gi",
			clusterapi.DRADriverAnnotation: "dra-capi.example.com", clusterapi.GPUCountAnnotation: "2",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := e.startAutoscaler(t, ctx, nil)
	createClaimPods(t, ctx, e.ns, "gpu", 3, "one-gpu")
	waitUnschedulable(t, ctx, e.ns, 3)

	if err := a.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"gpu": 1}, e.replicas(t, ctx)); diff != "" {
		t.Fatalf("replicas after the first loop (-want +got):\n%s", diff)
	}
	wantPodEvent(t, ctx, e.ns, `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/e2e-dra-capi-devices", resources: gpu-capi.example.com.deviceclass.resource.k8s.io/devices`)
}

// TestDRAScaleUpFromZeroOnClusterAPI: a MachineDeployment at zero replicas
// whose machines have two devices of a DRA driver. localcluster writes
// upstream's dra-driver and gpu-count capacity annotations for it, which is
// all the autoscaler knows of its devices; three pods with a one-device claim
// each get two machines in one scale-up, whose nodes publish the devices, and
// run with their claims allocated there.
func TestDRAScaleUpFromZeroOnClusterAPI(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	createDeviceClass(t, ctx, "gpu-capi-run.example.com", "dra-capi-run.example.com")
	createClaimTemplate(t, ctx, e.ns, "one-gpu", "gpu-capi-run.example.com")
	machine := kwokMachine("16", "64Gi", "", "1s", map[string]string{"e2e.quotascale.io/dra": "capi-run"})
	machine.Node.Devices = []kwok.DevicePoolConfig{{Driver: "dra-capi-run.example.com", Count: 2}}
	e.createGroup(t, ctx, "dra-from-zero", 0, 5, machine)
	a := e.startAutoscaler(t, ctx, nil)
	createClaimPods(t, ctx, e.ns, "gpu", 3, "one-gpu")
	waitUnschedulable(t, ctx, e.ns, 3)
	watch := watchReplicas(t, ctx, e)
	loopUntil(t, ctx, a, "3 pods run", nil, runningPods(e.ns, 3))
	if diff := cmp.Diff(map[string]int{"dra-from-zero": 2}, e.replicas(t, ctx)); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	if h := watch.highest(); h != 2 {
		t.Errorf("replicas went up to %d, want 2", h)
	}
	pods, _, err := claimPlacement(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2}, sortedCounts(pods)); diff != "" {
		t.Errorf("pods per node (-want +got):\n%s", diff)
	}
}
