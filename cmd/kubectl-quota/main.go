// Command kubectl-quota is a kubectl plugin (`kubectl quota ...`) that explains,
// from live objects, why a pod is pending, and shows the ElasticQuotaTree and the
// CapacityQuotas with the figures the scheduler and the autoscaler enforce.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/quotascale/quotascale/cmd/kubectl-quota/cli"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := cli.NewRootCommand(streams).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
