// Package demo plays the product documents' scenarios on a localcluster and prints
// what a user would see with kubectl.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/quotascale/quotascale/examples"
	"github.com/quotascale/quotascale/localcluster"
)

// NodeCPU and NodeMemory are the machine shape of seed 000's example cluster.
const (
	NodeCPU    = "56"
	NodeMemory = "224Gi"
)

// Run applies the seeds' manifests verbatim and prints them the way kubectl get
// does.
func Run(ctx context.Context, c *localcluster.Cluster, out io.Writer) error {
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
	for _, get := range []struct{ command, path string }{
		{"kubectl get nodes", "/api/v1/nodes"},
		{"kubectl get elasticquotatree -n kube-system", "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"},
		{"kubectl get resourceflavors", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors"},
		{"kubectl get cq", "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas"},
	} {
		section(out, "$ "+get.command)
		table, err := localcluster.GetTable(ctx, c.Config, get.path)
		if err != nil {
			return err
		}
		if err := localcluster.PrintTable(out, table, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

func section(out io.Writer, title string) {
	fmt.Fprintf(out, "\n%s\n", title)
}
