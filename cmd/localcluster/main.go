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
	var (
		nodes      = flag.Int("nodes", 0, "number of kwok nodes to create")
		nodeCPU    = flag.String("node-cpu", "4", "cpu capacity of each node")
		nodeMemory = flag.String("node-memory", "16Gi", "memory capacity of each node")
		nodeLabels = flag.String("node-labels", "", "labels of each node, as k1=v1,k2=v2")
		runDemo    = flag.Bool("demo", false, "play the seed scenarios (implies --nodes=2 --node-cpu=56 --node-memory=224Gi and the example node groups unless set)")
		nodeGroups = flag.String("node-group-config", "", "node groups in the kwok cloud's format (a file, or configmap:NAMESPACE/NAME without --cluster-api): runs the cluster autoscaler and the infrastructure behind it")
		capi       = flag.Bool("cluster-api", false, "run Cluster API's controllers with localcluster's kwok infrastructure provider; the node groups become MachineDeployments and the autoscaler uses --cloud-provider=clusterapi (default with --demo)")
		scan       = flag.Duration("scan-interval", 2*time.Second, "the autoscaler's --scan-interval")
		logFile    = flag.String("log-file", "", "file for the control plane's logs (default: localcluster.log next to the kubeconfig)")
		autoscaler = flag.Bool("autoscaler", true, "run the cluster autoscaler in this process; false starts only the node groups (the example ones unless --node-group-config) and prints the command line that runs the cluster-autoscaler binary against them")
	)
	flag.Usage = usage
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *runDemo {
		if !set["nodes"] {
			*nodes = 2
		}
		if !set["node-cpu"] {
			*nodeCPU = demo.NodeCPU
		}
		if !set["node-memory"] {
			*nodeMemory = demo.NodeMemory
		}
		if !set["cluster-api"] {
			*capi = true
		}
	}
	if err := checkLocalFlags(*runDemo, *autoscaler, *nodeGroups, *capi, *scan); err != nil {
		return err
	}
	specs, err := nodeSpecs(*nodes, *nodeCPU, *nodeMemory, *nodeLabels)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logs := localcluster.NewLogBuffer(64 << 20)
	localcluster.CaptureKlog(logs)
	fmt.Println("Starting the control plane (etcd, kube-apiserver, controllers, kwok, kube-scheduler)...")
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	started := time.Now()
	cluster, err := localcluster.Start(startCtx, localcluster.Options{Nodes: specs})
	if err != nil {
		_, _ = logs.WriteTo(os.Stderr)
		return err
	}
	defer cluster.Stop()
	fmt.Printf("Up in %s with %d kwok node(s).\n", time.Since(started).Round(100*time.Millisecond), len(specs))

	logPath := *logFile
	if logPath == "" {
		logPath = filepath.Join(cluster.Dir, "localcluster.log")
	}
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer f.Close()
	_, _ = logs.WriteTo(f)
	localcluster.CaptureKlog(f)

	if (*runDemo || !*autoscaler) && *nodeGroups == "" {
		*nodeGroups = filepath.Join(cluster.Dir, "nodegroups.yaml")
		if err := os.WriteFile(*nodeGroups, examples.NodeGroups, 0o644); err != nil {
			return fmt.Errorf("writing the example node groups: %w", err)
		}
	}
	env := demo.Env{Cluster: cluster, VisibilityLog: filepath.Join(cluster.Dir, "visibility.log")}
	if *nodeGroups != "" {
		groups, err := startNodeGroups(ctx, cluster, *nodeGroups, *capi, !*autoscaler, *scan, env.VisibilityLog)
		if err != nil {
			return err
		}
		defer groups.Stop()
		env.Autoscaler = groups.Autoscaler
		if *capi {
			env.ClusterAPINamespace = localcluster.LocalUpClusterAPINamespace
		}
	}
	if *runDemo {
		if err := demo.Run(ctx, env, os.Stdout); err != nil {
			return err
		}
	}

	fmt.Println("\nKubeconfig:")
	fmt.Println(cluster.KubeconfigPath)
	fmt.Printf("\nTry:\n  export KUBECONFIG=%s\n  kubectl get nodes,elasticquotatrees -A\n  kubectl get cq\n", cluster.KubeconfigPath)
	if env.ClusterAPINamespace != "" {
		fmt.Printf("  kubectl get machinedeployments,machines,kwokmachines -n %s\n", env.ClusterAPINamespace)
	}
	fmt.Printf("\nLogs: %s\nPress Ctrl-C to stop.\n", logPath)
	<-ctx.Done()
	fmt.Println("\nStopping...")
	return nil
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
