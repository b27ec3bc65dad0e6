package localcluster

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// apiServerFlags keeps the control plane usable without the components a real
// cluster has: nothing creates default service accounts, and no node lifecycle
// controller removes the not-ready taint that TaintNodesByCondition adds. It
// compacts etcd's history every minute rather than five, so that soaks and
// benchmarks that churn thousands of pods keep etcd small. RBAC authorizes
// requests, as in a real cluster (the test server allows everything by
// default): the components here use the loopback client, a system:masters
// user, and a test can check what a ServiceAccount bound to given roles may do.
var apiServerFlags = []string{
	"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	"--authorization-mode=RBAC",
	"--etcd-compaction-interval=1m",
}

type apiServer struct {
	config   *restclient.Config
	tearDown func()
}

func startAPIServer(ctx context.Context, tb *shim, etcdURL string, extraFlags []string) (srv *apiServer, err error) {
	defer func() {
		if r := recover(); r != nil {
			fatal, ok := r.(shimFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("starting kube-apiserver: %s", fatal.msg)
		}
	}()
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}

	tctx := ktesting.InitCtx(klog.NewContext(ctx, tb.logger), tb)
	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	// The invariant check scrapes /metrics at teardown and fails on metrics that
	// only a full cluster produces.
	opts.DisableInvariantChecks = true
	flags := append(append(append([]string{}, apiServerFlags...), workloadAPIServerFlags...), extraFlags...)
	server, err := kubeapiservertesting.StartTestServer(tctx, opts, flags, storage)
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	return &apiServer{config: server.ClientConfig, tearDown: server.TearDownFn}, nil
}
