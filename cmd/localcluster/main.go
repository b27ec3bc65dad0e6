// Command localcluster runs Quotascale's in-process control plane: embedded etcd,
// kube-apiserver, the deployment, replica set and namespace controllers, kwok and
// the kube-scheduler. It prints a kubeconfig path and runs until interrupted.
//
// With --node-group-config it also runs the cluster autoscaler with the kwok
// provider, and the kwok cloud that provisions its nodes; with --cluster-api as
// well, Cluster API's own controllers run instead, the node groups become
// MachineDeployments of a Cluster, and the autoscaler uses the clusterapi
// provider. With --demo it plays the product documents' scenarios (`make
// demo`), on Cluster API unless --cluster-api=false.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cmd/localcluster/demo"
	"github.com/quotascale/quotascale/examples"
	"github.com/quotascale/quotascale/localcluster"
)

func main() {
	if err := run(); err != nil {
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
	)
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

	if *runDemo && *nodeGroups == "" {
		*nodeGroups = filepath.Join(cluster.Dir, "nodegroups.yaml")
		if err := os.WriteFile(*nodeGroups, examples.NodeGroups, 0o644); err != nil {
			return fmt.Errorf("writing the example node groups: %w", err)
		}
	}
	env := demo.Env{Cluster: cluster, VisibilityLog: filepath.Join(cluster.Dir, "visibility.log")}
	if *nodeGroups != "" {
		opts := config.Defaults()
		provider := "kwok provider"
		if *capi {
			if err := startClusterAPI(ctx, cluster, *nodeGroups, &opts); err != nil {
				return err
			}
			env.ClusterAPINamespace = clusterAPINamespace
			provider = "clusterapi provider"
		} else {
			opts.CloudConfig = *nodeGroups
		}
		opts.LeaderElect = false
		opts.ScanInterval = *scan
		opts.Address = "127.0.0.1:0"
		opts.VisibilityLogFile = env.VisibilityLog
		a, stopAutoscaler, err := cluster.StartAutoscaler(ctx, opts)
		if err != nil {
			return err
		}
		defer stopAutoscaler()
		addr, err := a.Serve(ctx, opts.Address)
		if err != nil {
			return err
		}
		env.Autoscaler = a
		fmt.Printf("Cluster autoscaler running (%s, node groups %s); metrics at http://%s/metrics, visibility log %s\n",
			provider, *nodeGroups, addr, env.VisibilityLog)
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

// The Cluster of --cluster-api and the namespace of its objects.
const (
	clusterAPINamespace = "default"
	clusterAPICluster   = "localcluster"
)

// startClusterAPI starts Cluster API's controllers, creates the Cluster and
// a MachineDeployment per node group of the file, and points the autoscaler's
// options at them.
func startClusterAPI(ctx context.Context, cluster *localcluster.Cluster, nodeGroups string, opts *config.Options) error {
	raw, err := os.ReadFile(nodeGroups)
	if err != nil {
		return fmt.Errorf("--node-group-config with --cluster-api takes a file: %w", err)
	}
	fmt.Println("Starting Cluster API (MachineDeployment, MachineSet, Machine and MachinePool controllers, kwok infrastructure)...")
	capi, err := cluster.StartClusterAPI(ctx, localcluster.ClusterAPIOptions{})
	if err != nil {
		return err
	}
	if err := capi.CreateCluster(ctx, clusterAPINamespace, clusterAPICluster); err != nil {
		return err
	}
	names, err := capi.CreateNodeGroups(ctx, clusterAPINamespace, clusterAPICluster, raw)
	if err != nil {
		return fmt.Errorf("%s: %w", nodeGroups, err)
	}
	fmt.Printf("Cluster %s/%s with MachineDeployments %s\n", clusterAPINamespace, clusterAPICluster, strings.Join(names, ", "))
	opts.CloudProviderName = clusterapi.ProviderName
	opts.NodeGroupAutoDiscovery = []string{"clusterapi:namespace=" + clusterAPINamespace + ",clusterName=" + clusterAPICluster}
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
