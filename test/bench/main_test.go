package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/quotascale/quotascale/localcluster"
)

// TestMain starts no control plane unless benchmarks were asked for: `go test
// ./...` (make test) runs this package in milliseconds. With -bench, the one
// control plane of the binary is started lazily by the first benchmark that needs
// it, so a -bench pattern matching nothing here costs nothing either. Logs are
// captured as in the e2e suite and printed only on failure; so are the API
// server's etcd client warnings, which bypass klog (see captureStderr).
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	if os.Getenv("QUOTASCALE_TEST_LOGS") == "stderr" {
		os.Exit(localcluster.RunTests(runThenStop{m}))
	}
	warnings := localcluster.NewLogBuffer(1 << 20)
	restore, err := captureStderr(warnings)
	if err != nil {
		fmt.Fprintln(os.Stderr, "capturing stderr:", err)
		os.Exit(1)
	}
	code := localcluster.RunTests(runThenStop{m})
	restore()
	if code != 0 {
		_, _ = os.Stderr.WriteString("\n--- etcd client warnings (most recent last) ---\n")
		_, _ = warnings.WriteTo(os.Stderr)
	}
	os.Exit(code)
}

type runThenStop struct{ m *testing.M }

func (r runThenStop) Run() int {
	defer func() {
		if shared.cluster != nil {
			shared.cluster.Stop()
		}
	}()
	return r.m.Run()
}

var shared struct {
	once    sync.Once
	cluster *localcluster.Cluster
	err     error
}

// cluster returns the package's control plane, starting it on first use. The
// scheduler is off: each benchmark starts the variant it measures.
func cluster(b *testing.B) *localcluster.Cluster {
	b.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.cluster, shared.err = localcluster.Start(ctx, localcluster.Options{NoScheduler: true})
		if shared.err != nil {
			shared.err = fmt.Errorf("starting localcluster: %w", shared.err)
		}
	})
	if shared.err != nil {
		b.Fatal(shared.err)
	}
	return shared.cluster
}
