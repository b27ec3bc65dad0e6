// Package e2e drives the acceptance scenarios on one in-process control plane per
// test binary (localcluster). Tests run one after another; each works in its own
// namespaces and removes the nodes it created.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/quotascale/quotascale/localcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(runWithCluster{m}))
}

type runWithCluster struct{ m *testing.M }

func (r runWithCluster) Run() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting localcluster:", err)
		return 1
	}
	defer cluster.Stop()
	defer removeBuiltBinaries()
	return r.m.Run()
}
