// Command localcluster runs Quotascale's in-process control plane: embedded etcd,
// kube-apiserver, the deployment, replica set and namespace controllers, kwok and
// the kube-scheduler. It prints a kubeconfig path and runs until interrupted.
//
// With --node-group-config it also runs the cluster autoscaler with the kwok
// provider, and the kwok cloud that provisions its nodes; with --cluster-api as
// well, Cluster API's own controllers run instead, the node groups become
// MachineDeployments of a Cluster, and the autoscaler uses the clusterapi
// provider. With --demo it plays the product documents' scenarios (`make
// demo`), on Cluster API unless --cluster-api=false. With --autoscaler=false the
// node groups and their infrastructure run without the autoscaler, and the
// command line that runs the cluster-autoscaler binary against them is
// printed. Flags after -- are the cluster autoscaler's, in process or in that
// command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/cmd/localcluster/demo"
	"github.com/quotascale/quotascale/examples"
	"github.com/quotascale/quotascale/localcluster"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return // -- --help: the autoscaler's flags are printed
		}
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	fl, err := parseFlags()
	if err != nil {
		return err
	}
	specs, err := nodeSpecs(fl.nodes, fl.nodeCPU, fl.nodeMemory, fl.nodeLabels)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cluster, logPath, closeLog, err := startControlPlane(ctx, specs, fl.logFile)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	defer closeLog()

	if (fl.demo || !fl.autoscaler) && fl.nodeGroups == "" {
		fl.nodeGroups = filepath.Join(cluster.Dir, "nodegroups.yaml")
		if err := os.WriteFile(fl.nodeGroups, examples.NodeGroups, 0o644); err != nil {
			return fmt.Errorf("writing the example node groups: %w", err)
		}
	}
	env := demo.Env{Cluster: cluster, VisibilityLog: filepath.Join(cluster.Dir, "visibility.log")}
	if fl.nodeGroups != "" {
		groups, err := startNodeGroups(ctx, cluster, fl.nodeGroups, fl.capi, !fl.autoscaler, fl.scan, env.VisibilityLog)
		if err != nil {
			return err
		}
		defer groups.Stop()
		env.Autoscaler = groups.Autoscaler
		// A --visibility-log-file after -- is where the autoscaler writes.
		if groups.Options != nil && groups.Options.VisibilityLogFile != "" {
			env.VisibilityLog = groups.Options.VisibilityLogFile
		}
		if fl.capi {
			env.ClusterAPINamespace = localcluster.LocalUpClusterAPINamespace
		}
	}
	var rec *recording
	if fl.recordMetrics != "" {
		if rec, err = startRecording(ctx, env.Autoscaler, fl.recordMetrics, fl.recordInterval); err != nil {
			return err
		}
	}
	if fl.demo {
		if err := demo.Run(ctx, env, os.Stdout); err != nil {
			return err
		}
		// A demo's recording ends a few scrapes after its scenarios, so
		// that it shows where they settle.
		if rec != nil {
			if err := rec.finish(ctx, recordTailScrapes*fl.recordInterval); err != nil {
				return err
			}
			rec = nil
		}
	}
	printUsage(cluster, env, logPath)
	<-ctx.Done()
	fmt.Println("\nStopping...")
	if rec != nil {
		return rec.finish(ctx, 0)
	}
	return nil
}

// localFlags are localcluster's own flags; the autoscaler's come after --.
type localFlags struct {
	nodes                           int
	nodeCPU, nodeMemory, nodeLabels string
	demo, capi, autoscaler          bool
	nodeGroups, logFile             string
	scan                            time.Duration
	recordMetrics                   string
	recordInterval                  time.Duration
}

// parseFlags parses localcluster's flags, with --demo's defaults for those
// not set, and checks them.
func parseFlags() (*localFlags, error) {
	fl := &localFlags{}
	flag.IntVar(&fl.nodes, "nodes", 0, "number of kwok nodes to create")
	flag.StringVar(&fl.nodeCPU, "node-cpu", "4", "cpu capacity of each node")
	flag.StringVar(&fl.nodeMemory, "node-memory", "16Gi", "memory capacity of each node")
	flag.StringVar(&fl.nodeLabels, "node-labels", "", "labels of each node, as k1=v1,k2=v2")
	flag.BoolVar(&fl.demo, "demo", false, "play the seed scenarios (implies --nodes=2 --node-cpu=56 --node-memory=224Gi and the example node groups unless set)")
	flag.StringVar(&fl.nodeGroups, "node-group-config", "", "node groups in the kwok cloud's format (a file, or configmap:NAMESPACE/NAME without --cluster-api): runs the cluster autoscaler and the infrastructure behind it")
	flag.BoolVar(&fl.capi, "cluster-api", false, "run Cluster API's controllers with localcluster's kwok infrastructure provider; the node groups become MachineDeployments and the autoscaler uses --cloud-provider=clusterapi (default with --demo)")
	flag.DurationVar(&fl.scan, "scan-interval", 2*time.Second, "the autoscaler's --scan-interval")
	flag.StringVar(&fl.logFile, "log-file", "", "file for the control plane's logs (default: localcluster.log next to the kubeconfig)")
	flag.StringVar(&fl.recordMetrics, "record-metrics", "", "scrape the in-process autoscaler and scheduler every --record-metrics-interval and write their counters and gauges, with timestamps, in Prometheus' text format to this file (gzip if it ends in .gz) six scrapes after the demo's scenarios end, or at Ctrl-C without --demo; hack/dashboardplot draws the dashboard from it")
	flag.DurationVar(&fl.recordInterval, "record-metrics-interval", 5*time.Second, "scrape interval of --record-metrics")
	flag.BoolVar(&fl.autoscaler, "autoscaler", true, "run the cluster autoscaler in this process; false starts only the node groups (the example ones unless --node-group-config) and prints the command line that runs the cluster-autoscaler binary against them")
	flag.Usage = usage
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fl.demo {
		if !set["nodes"] {
			fl.nodes = 2
		}
		if !set["node-cpu"] {
			fl.nodeCPU = demo.NodeCPU
		}
		if !set["node-memory"] {
			fl.nodeMemory = demo.NodeMemory
		}
		if !set["cluster-api"] {
			fl.capi = true
		}
	}
	if err := checkLocalFlags(fl.demo, fl.autoscaler, fl.nodeGroups, fl.capi, fl.scan); err != nil {
		return nil, err
	}
	return fl, nil
}

// startControlPlane starts the control plane with its kwok nodes, its logs
// kept in memory until it is up and then written to the log file, whose path
// it returns with a function that closes it.
func startControlPlane(ctx context.Context, specs []localcluster.NodeSpec, logFile string) (*localcluster.Cluster, string, func(), error) {
	logs := localcluster.NewLogBuffer(64 << 20)
	localcluster.CaptureKlog(logs)
	fmt.Println("Starting the control plane (etcd, kube-apiserver, controllers, kwok, kube-scheduler)...")
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	started := time.Now()
	cluster, err := localcluster.Start(startCtx, localcluster.Options{Nodes: specs})
	if err != nil {
		_, _ = logs.WriteTo(os.Stderr)
		return nil, "", nil, err
	}
	fmt.Printf("Up in %s with %d kwok node(s).\n", time.Since(started).Round(100*time.Millisecond), len(specs))
	logPath := logFile
	if logPath == "" {
		logPath = filepath.Join(cluster.Dir, "localcluster.log")
	}
	f, err := os.Create(logPath)
	if err != nil {
		cluster.Stop()
		return nil, "", nil, fmt.Errorf("creating the log file: %w", err)
	}
	_, _ = logs.WriteTo(f)
	localcluster.CaptureKlog(f)
	return cluster, logPath, func() { _ = f.Close() }, nil
}

// printUsage tells how to reach the cluster, what to look at, and where the
// logs are.
func printUsage(cluster *localcluster.Cluster, env demo.Env, logPath string) {
	fmt.Println("\nKubeconfig:")
	fmt.Println(cluster.KubeconfigPath)
	fmt.Printf("\nTry:\n  export KUBECONFIG=%s\n  kubectl get nodes,elasticquotatrees -A\n  kubectl get cq\n  kubectl get workloads,podgroups -A   # the Workload API (scheduling.k8s.io/v1beta1) is served\n", cluster.KubeconfigPath)
	if env.ClusterAPINamespace != "" {
		fmt.Printf("  kubectl get machinedeployments,machines,kwokmachines -n %s\n", env.ClusterAPINamespace)
	}
	fmt.Printf("\nLogs: %s\nPress Ctrl-C to stop.\n", logPath)
}

func nodeSpecs(n int, cpu, memory, labelList string) ([]localcluster.NodeSpec, error) {
	cpuQ, err := resource.ParseQuantity(cpu)
	if err != nil {
		return nil, fmt.Errorf("--node-cpu: %w", err)
	}
	memQ, err := resource.ParseQuantity(memory)
	if err != nil {
		return nil, fmt.Errorf("--node-memory: %w", err)
	}
	labels := map[string]string{}
	if labelList != "" {
		for _, kv := range strings.Split(labelList, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--node-labels: %q is not key=value", kv)
			}
			labels[k] = v
		}
	}
	specs := make([]localcluster.NodeSpec, 0, n)
	for i := 0; i < n; i++ {
		specs = append(specs, localcluster.NodeSpec{
			Name:     fmt.Sprintf("kwok-node-%d", i),
			Labels:   labels,
			Capacity: corev1.ResourceList{corev1.ResourceCPU: cpuQ, corev1.ResourceMemory: memQ},
		})
	}
	return specs, nil
}
