package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// The Cluster of NodeGroupsOptions.ClusterAPI and the namespace of its objects.
const (
	LocalUpClusterAPINamespace = "default"
	LocalUpClusterAPICluster   = "localcluster"
)

// NodeGroupsOptions are what `make local-up` (cmd/localcluster) runs beside the
// control plane: node groups, the infrastructure behind them, and the cluster
// autoscaler, in this process or as a command line for its binary.
type NodeGroupsOptions struct {
	// Config is the node groups in the kwok cloud's format: a file, or
	// configmap:NAMESPACE/NAME without ClusterAPI.
	Config string
	// ClusterAPI runs Cluster API's controllers; each node group becomes a
	// MachineDeployment of a Cluster, and the autoscaler uses the clusterapi
	// provider. Otherwise the kwok cloud provisions the kwok provider's nodes.
	ClusterAPI bool
	// NoAutoscaler starts the infrastructure only; NodeGroups.Command runs the
	// cluster-autoscaler binary against it.
	NoAutoscaler bool
	// AutoscalerArgs are cluster-autoscaler flags, parsed as the binary does,
	// over local-up's defaults (ScanInterval, and in process a metrics address
	// on a free port and VisibilityLog).
	AutoscalerArgs []string
	ScanInterval   time.Duration
	VisibilityLog  string
}

// NodeGroups are the running node groups of StartNodeGroups.
type NodeGroups struct {
	// Provider is the autoscaler's --cloud-provider.
	Provider string
	// MachineDeployments are the node groups' with ClusterAPI.
	MachineDeployments []string
	// Options are the in-process autoscaler's, Autoscaler the autoscaler
	// itself and MetricsAddress where it serves /metrics; nil and empty with
	// NoAutoscaler.
	Options        *config.Options
	Autoscaler     *app.Autoscaler
	MetricsAddress string
	// Command runs Quotascale's cluster-autoscaler binary (`make build`)
	// against the node groups, UpstreamCommand upstream's (Cluster API only:
	// upstream's kwok provider is another); with NoAutoscaler.
	Command, UpstreamCommand []string
	// Warnings are about the flags, as the binary logs them at start.
	Warnings []string

	stops []func()
}

// Stop stops the autoscaler and the infrastructure; it is safe to call more
// than once.
func (g *NodeGroups) Stop() {
	for i := len(g.stops) - 1; i >= 0; i-- {
		g.stops[i]()
	}
	g.stops = nil
}

// StartNodeGroups starts the infrastructure of opts.Config and, unless
// opts.NoAutoscaler, the cluster autoscaler in this process. Either way the
// autoscaler's flags are parsed as the binary parses them, so that a flag the
// binary refuses is refused here too.
func (c *Cluster) StartNodeGroups(ctx context.Context, opts NodeGroupsOptions) (g *NodeGroups, err error) {
	g = &NodeGroups{Provider: kwok.ProviderName}
	defer func() {
		if err != nil {
			g.Stop()
		}
	}()
	if opts.ClusterAPI {
		g.Provider = clusterapi.ProviderName
	}
	var kubeconfig, addr string
	if opts.NoAutoscaler {
		if addr, err = freeAddress(); err != nil {
			return nil, err
		}
		kubeconfig = c.KubeconfigPath
	}
	args, err := opts.autoscalerArgs(kubeconfig, addr)
	if err != nil {
		return nil, err
	}
	parsed, err := args.parse()
	if err != nil {
		return nil, err
	}
	g.Warnings = parsed.warnings
	if err := c.startInfrastructure(ctx, g, opts, parsed.opts); err != nil {
		return nil, err
	}
	if opts.NoAutoscaler {
		g.Command = append([]string{"bin/cluster-autoscaler"}, parsed.args...)
		if opts.ClusterAPI {
			g.UpstreamCommand = append([]string{"cluster-autoscaler"}, parsed.upstreamArgs...)
		}
		return g, nil
	}
	return g, c.startLocalAutoscaler(ctx, g, opts, parsed)
}

// CheckAutoscalerArgs parses opts.AutoscalerArgs as StartNodeGroups does, so
// that a wrong flag stops local-up before the control plane starts.
func CheckAutoscalerArgs(opts NodeGroupsOptions) error {
	args, err := opts.autoscalerArgs("", "")
	if err != nil {
		return err
	}
	_, err = args.parse()
	return err
}

// autoscalerArgs are the autoscaler's flags: local-up's, which point it at
// the node groups (and, for the binary, the cluster at kubeconfig, with
// metrics on addr), and the user's.
func (opts NodeGroupsOptions) autoscalerArgs(kubeconfig, addr string) (autoscalerArgs, error) {
	owned := []string{"--cloud-provider=" + kwok.ProviderName, "--kwok-state-configmap=" + config.Defaults().KwokState}
	if opts.ClusterAPI {
		owned = []string{"--cloud-provider=" + clusterapi.ProviderName,
			"--node-group-auto-discovery=clusterapi:namespace=" + LocalUpClusterAPINamespace + ",clusterName=" + LocalUpClusterAPICluster}
	} else {
		source, err := absoluteSource(opts.Config)
		if err != nil {
			return autoscalerArgs{}, err
		}
		owned = append(owned, "--cloud-config="+source)
	}
	// The cluster's scheduler runs CapacityScheduling in its default profile.
	owned = append(owned, "--elastic-quota-scheduler-names="+corev1.DefaultSchedulerName)
	if kubeconfig != "" {
		owned = append(owned, "--kubeconfig="+kubeconfig)
	}
	defaults := []string{"--scan-interval=" + opts.ScanInterval.String(), "--leader-elect=false"}
	if addr != "" {
		defaults = append(defaults, "--address="+addr)
	}
	return autoscalerArgs{defaults: defaults, owned: owned, user: opts.AutoscalerArgs, inProcess: !opts.NoAutoscaler}, nil
}

// startInfrastructure starts the kwok cloud of the kwok provider, or Cluster
// API with a Cluster and a MachineDeployment per node group.
func (c *Cluster) startInfrastructure(ctx context.Context, g *NodeGroups, opts NodeGroupsOptions, autoscaler config.Options) error {
	if !opts.ClusterAPI {
		if !opts.NoAutoscaler {
			return nil // StartAutoscaler starts the kwok cloud with the autoscaler
		}
		stop, err := c.startKwokInfrastructure(ctx, autoscaler)
		if err != nil {
			return err
		}
		g.stops = append(g.stops, stop)
		return nil
	}
	raw, err := os.ReadFile(opts.Config)
	if err != nil {
		return fmt.Errorf("node groups for Cluster API must be a file: %w", err)
	}
	capi, err := c.StartClusterAPI(ctx, ClusterAPIOptions{})
	if err != nil {
		return err
	}
	g.stops = append(g.stops, capi.Stop)
	if err := capi.CreateCluster(ctx, LocalUpClusterAPINamespace, LocalUpClusterAPICluster); err != nil {
		return err
	}
	if g.MachineDeployments, err = capi.CreateNodeGroups(ctx, LocalUpClusterAPINamespace, LocalUpClusterAPICluster, raw); err != nil {
		return fmt.Errorf("%s: %w", opts.Config, err)
	}
	return nil
}

// startLocalAutoscaler starts the autoscaler in this process and serves its
// metrics.
func (c *Cluster) startLocalAutoscaler(ctx context.Context, g *NodeGroups, opts NodeGroupsOptions, parsed *parsedArgs) error {
	autoscalerOpts := parsed.opts
	if !parsed.changed["address"] {
		autoscalerOpts.Address = "127.0.0.1:0"
	}
	if !parsed.changed["visibility-log-file"] {
		autoscalerOpts.VisibilityLogFile = opts.VisibilityLog
	}
	a, stop, err := c.StartAutoscaler(ctx, autoscalerOpts)
	if err != nil {
		return err
	}
	g.stops = append(g.stops, stop)
	serveCtx, stopServing := context.WithCancel(c.background)
	g.stops = append(g.stops, stopServing)
	if g.MetricsAddress, err = a.Serve(serveCtx, autoscalerOpts.Address); err != nil {
		return err
	}
	g.Options, g.Autoscaler = &autoscalerOpts, a
	return nil
}

// absoluteSource makes a node group file's path absolute, so that the
// printed command line works from any directory; configmap:... stays.
func absoluteSource(source string) (string, error) {
	if source == "" || strings.HasPrefix(source, "configmap:") {
		return source, nil
	}
	abs, err := filepath.Abs(source)
	if err != nil {
		return "", fmt.Errorf("node groups %s: %w", source, err)
	}
	return abs, nil
}

// freeAddress is a local address with a port free now, for the binary's
// /metrics: a second local-up, or a test binary beside it, gets another.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port for the autoscaler's metrics: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
