// Package demo plays the product documents' scenarios on a localcluster and prints
// what a user would see with kubectl.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/examples"
	"github.com/quotascale/quotascale/localcluster"
)

// NodeCPU and NodeMemory are the machine shape of seed 000's example cluster.
const (
	NodeCPU    = "56"
	NodeMemory = "224Gi"
)

// Env is what the demo plays on: the cluster, and the autoscaler running against
// its kwok cloud with its visibility log.
type Env struct {
	Cluster       *localcluster.Cluster
	Autoscaler    *app.Autoscaler
	VisibilityLog string
	// ClusterAPINamespace holds the MachineDeployments when the autoscaler
	// runs on Cluster API; empty on the kwok cloud.
	ClusterAPINamespace string
}

// Run applies the seeds' manifests verbatim, prints them the way kubectl get does,
// then plays seed 000's borrow-and-reclaim sequence, a gang that waits whole
// and runs whole after reclaim, seed 001's quota-capped scale-up, and GPUs
// through DRA stopped by the tree and by a CapacityQuota.
func Run(ctx context.Context, env Env, out io.Writer) error {
	c := env.Cluster
	section(out, "Applying seed 000's ElasticQuotaTree, its spot ResourceFlavor and seed 001's CapacityQuotas, unchanged")
	for _, m := range [][]byte{examples.ElasticQuotaTree, examples.ResourceFlavor, examples.CapacityQuotas} {
		objs, err := c.Apply(ctx, m)
		if err != nil {
			return err
		}
		for _, o := range objs {
			fmt.Fprintf(out, "%s/%s applied\n", o.GetKind(), o.GetName())
		}
	}
	if err := waitForTreeStatus(ctx, c); err != nil {
		return err
	}
	for _, get := range []struct{ command, path string }{
		{"kubectl get nodes", "/api/v1/nodes"},
		{"kubectl get elasticquotatree -n kube-system", "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"},
		{"kubectl get resourceflavors", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"},
		{"kubectl get cq", "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas"},
	} {
		if err := printGet(ctx, c, out, get.command, get.path); err != nil {
			return err
		}
	}
	if err := playElasticQuotaTree(ctx, c, out); err != nil {
		return err
	}
	if err := playGang(ctx, c, out); err != nil {
		return err
	}
	if err := playCapacityQuota(ctx, env, out); err != nil {
		return err
	}
	return playDevices(ctx, env, out)
}

func printGet(ctx context.Context, c *localcluster.Cluster, out io.Writer, command, path string) error {
	section(out, "$ "+command)
	table, err := localcluster.GetTable(ctx, c.Config, path)
	if err != nil {
		return err
	}
	return localcluster.PrintTable(out, table, time.Now())
}

// waitForTreeStatus waits until the scheduler has judged the tree, so the table
// shows its Valid and Active columns.
func waitForTreeStatus(ctx context.Context, c *localcluster.Cluster) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := c.Dynamic.Resource(schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")).
			Namespace(schedulingv1beta1.EnforcedNamespace).Get(ctx, "elasticquotatree", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return len(conditions) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the scheduler to report on the ElasticQuotaTree: %w", err)
	}
	return nil
}

func section(out io.Writer, title string) {
	fmt.Fprintf(out, "\n%s\n", title)
}
