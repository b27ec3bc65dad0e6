package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/localcluster"
)

// TestClusterAPIManagementClusterApart: Cluster API and its objects live on
// a management cluster of their own; the package's cluster is the workload
// cluster, with the pods, the scheduler and the nodes. The autoscaler runs
// against the workload cluster, with --cloud-config the management
// cluster's kubeconfig, and scales a MachineDeployment there for the
// workload's pending pods.
func TestClusterAPIManagementClusterApart(t *testing.T) {
	ctx := testContext(t)
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	mgmt, err := localcluster.Start(startCtx, localcluster.Options{NoScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgmt.Stop)
	capi, err := mgmt.StartClusterAPI(startCtx, localcluster.ClusterAPIOptions{Workload: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(capi.Stop)
	e := newCAPIEnv(t, ctx, capi)
	labels := map[string]string{"e2e-remote": "yes"}
	e.createGroup(t, ctx, "remote", 0, 3, kwokMachine("4", "16Gi", "", "1s", labels))

	workload := createNamespace(t, ctx, "")
	a := e.startAutoscaler(t, ctx, nil)
	if got := e.options(t).CloudConfig; got != mgmt.KubeconfigPath {
		t.Fatalf("--cloud-config %q, want the management kubeconfig", got)
	}
	createPods(t, ctx, workload, "remote", 2, "3", labels)
	waitUnschedulable(t, ctx, workload, 2)
	loopUntil(t, ctx, a, "the pods run on nodes the management cluster made", nil, runningPods(workload, 2))

	if diff := cmp.Diff(map[string]int{"remote": 2}, e.replicas(t, ctx)); diff != "" {
		t.Errorf("management MachineDeployment replicas (-want +got):\n%s", diff)
	}
	// Pods run as soon as their nodes are ready; Cluster API's Machine
	// controller sets each Machine's nodeRef and the node's annotations a
	// reconcile later.
	waitFor(t, ctx, "workload nodes that match the management cluster's machines", func(ctx context.Context) error {
		nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "e2e-remote=yes"})
		if err != nil {
			return err
		}
		var fromMachines, onWorkload []string
		for _, m := range e.machines(t, ctx) {
			fromMachines = append(fromMachines, m.node)
		}
		for _, n := range nodes.Items {
			onWorkload = append(onWorkload, n.Name)
			if n.Annotations[clusterapi.ClusterNamespaceAnnotation] != e.ns || !strings.HasPrefix(n.Spec.ProviderID, "kwok-capi://"+e.ns+"/") {
				return fmt.Errorf("node %s does not come from the management cluster's machines: %v %s", n.Name, n.Annotations, n.Spec.ProviderID)
			}
		}
		if diff := cmp.Diff(fromMachines, onWorkload); diff != "" {
			return fmt.Errorf("workload nodes against the management cluster's nodeRefs (-want +got):\n%s", diff)
		}
		return nil
	})
	if own, err := mgmt.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "e2e-remote=yes"}); err != nil || len(own.Items) != 0 {
		t.Errorf("the management cluster has nodes of its own: %v %v", own, err)
	}
	if _, err := cluster.Client.Discovery().ServerResourcesForGroupVersion("cluster.x-k8s.io/v1beta2"); err == nil && !sharedCAPIStarted() {
		t.Errorf("the workload cluster serves Cluster API")
	}
}

// sharedCAPIStarted says whether another test has installed Cluster API on
// the package's cluster.
func sharedCAPIStarted() bool { return sharedCAPI != nil }
