// Package localcluster runs a real Kubernetes control plane inside one process for
// tests and the demo: embedded etcd, kube-apiserver, the deployment and replica set
// controllers, kwok playing the kubelet, and the kube-scheduler. Quotascale's CRDs
// are installed at start.
package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure a cluster.
type Options struct {
	// Nodes are created, kwok-managed, once the control plane is up.
	Nodes []NodeSpec
	// Scheduler configures the kube-scheduler; see SchedulerOptions.
	Scheduler SchedulerOptions
	// NoScheduler leaves the scheduler off; StartScheduler can start it later.
	NoScheduler bool
	// ExtraCRDs are installed with Quotascale's own (for example Cluster API's).
	ExtraCRDs [][]byte
	// Logs receives the components' own log lines that are not klog's (etcd is
	// silenced). Nil discards them.
	Logs io.Writer
}

// Cluster is a running control plane.
type Cluster struct {
	// Config reaches the API server with full rights.
	Config *restclient.Config
	// Client and Dynamic are clients built from Config.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// KubeconfigPath is a kubeconfig file for kubectl and other programs.
	KubeconfigPath string
	// Dir holds the cluster's files; it is removed on Stop.
	Dir string

	background context.Context
	cancel     context.CancelFunc
	etcd       *embed.Etcd
	api        *apiServer
	proxy      *apiProxy
	shim       *shim
	scheduler  schedulerRunner

	ctrlOnce sync.Once
	ctrl     client.Client
	ctrlErr  error
}

// Start brings a cluster up. The cluster outlives ctx, which bounds only the
// start; call Stop to shut it down.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	logs := opts.Logs
	if logs == nil {
		logs = io.Discard
	}
	dir, err := os.MkdirTemp("", "quotascale-localcluster-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	background, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.FromContext(ctx)))
	c = &Cluster{Dir: dir, background: background, cancel: cancel}
	c.shim = newShim("localcluster", dir, klog.FromContext(ctx).WithName("localcluster"))
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	if err := enableWorkloadAPI(); err != nil {
		return nil, err
	}
	etcd, etcdURL, err := startEtcd(ctx, dir)
	if err != nil {
		return nil, err
	}
	c.etcd = etcd
	if c.api, err = startAPIServer(background, c.shim, etcdURL, nil); err != nil {
		return nil, err
	}
	// Every client goes through the proxy, so SetAPIAvailable reaches them all.
	if c.proxy, err = startAPIProxy(strings.TrimPrefix(c.api.config.Host, "https://")); err != nil {
		return nil, err
	}
	c.Config = restclient.CopyConfig(c.api.config)
	c.Config.Host = "https://" + c.proxy.addr()
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	c.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.Config); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, c.Config, opts.ExtraCRDs); err != nil {
		return nil, err
	}
	if err := startControllers(background, c.Config); err != nil {
		return nil, err
	}
	if err := startDRA(background, c.Config); err != nil {
		return nil, err
	}
	if err := startKwok(background, c.KubeconfigPath, logs); err != nil {
		return nil, err
	}
	if !opts.NoScheduler {
		if err := c.StartScheduler(ctx, opts.Scheduler); err != nil {
			return nil, err
		}
	}
	for _, n := range opts.Nodes {
		if _, err := c.CreateNode(ctx, n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Stop shuts every component down and removes the cluster's files. It is safe to
// call more than once.
func (c *Cluster) Stop() {
	if c == nil || c.cancel == nil {
		return
	}
	c.StopScheduler()
	c.cancel()
	if c.proxy != nil {
		c.proxy.stop()
		c.proxy = nil
	}
	if c.api != nil {
		c.api.tearDown()
		c.api = nil
	}
	c.shim.runCleanups()
	if c.etcd != nil {
		c.etcd.Close()
		<-c.etcd.Server.StopNotify()
		c.etcd = nil
	}
	if c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
	c.cancel = nil
}

// SetAPIAvailable takes the API server away from every client of the cluster
// (scheduler, controllers, kwok, the autoscaler, tests) when false: open
// connections are cut and new ones refused, as when the API server is down. True
// brings it back; clients reconnect and their informers re-list.
func (c *Cluster) SetAPIAvailable(available bool) { c.proxy.setDown(!available) }

// Context is cancelled when the cluster stops; components started alongside the
// cluster (the autoscaler, informers of a test) can run on it.
func (c *Cluster) Context() context.Context { return c.background }
