package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

var (
	capiMachineDeployments = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
	capiMachines           = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	capiMachinePools       = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinepools"}

	sharedCAPIOnce sync.Once
	sharedCAPI     *localcluster.ClusterAPI
	sharedCAPIErr  error
)

// clusterAPI is Cluster API's controllers on the package's cluster, started
// by the first test that needs them and running until the cluster stops.
func clusterAPI(t *testing.T) *localcluster.ClusterAPI {
	t.Helper()
	sharedCAPIOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sharedCAPI, sharedCAPIErr = cluster.StartClusterAPI(ctx, localcluster.ClusterAPIOptions{})
	})
	if sharedCAPIErr != nil {
		t.Fatal(sharedCAPIErr)
	}
	return sharedCAPI
}

// capiEnv is a test's namespace on a Cluster API management cluster, with a
// Cluster object for the workload cluster.
type capiEnv struct {
	capi    *localcluster.ClusterAPI
	ns      string
	cluster string
	// dynamic reaches the management cluster.
	dynamic dynamic.Interface
}

const capiClusterName = "workload"

// newCAPIEnv makes a namespace with a ready Cluster on capi's management
// cluster. On cleanup it deletes the MachineDeployments and MachinePools and
// waits until their machines and nodes are gone, before the namespace goes:
// a Machine whose Cluster is deleted first could never finish its deletion.
func newCAPIEnv(t *testing.T, ctx context.Context, capi *localcluster.ClusterAPI) *capiEnv {
	t.Helper()
	mgmt := capi.Management()
	ns := createNamespaceOn(t, ctx, mgmt)
	if err := capi.CreateCluster(ctx, ns, capiClusterName); err != nil {
		t.Fatal(err)
	}
	e := &capiEnv{capi: capi, ns: ns, cluster: capiClusterName, dynamic: mgmt.Dynamic}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, r := range []schema.GroupVersionResource{capiMachineDeployments, capiMachinePools} {
			_ = mgmt.Dynamic.Resource(r).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, r := range []schema.GroupVersionResource{capiMachines, localcluster.KwokMachinePools} {
				list, err := mgmt.Dynamic.Resource(r).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) > 0 {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("the test's machines were not deleted: %v", err)
		}
	})
	return e
}

// createNamespaceOn is createNamespace on another cluster.
func createNamespaceOn(t *testing.T, ctx context.Context, c *localcluster.Cluster) string {
	t.Helper()
	if c == cluster {
		return createNamespace(t, ctx, "")
	}
	name := fmt.Sprintf("e2e-mgmt-%d", time.Now().UnixNano()%1e9)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// machine is a KwokMachineSpec of cpu and memory with labels.
func kwokMachine(cpu, memory, allocatableCPU, delay string, labels map[string]string) localcluster.KwokMachineSpec {
	spec := localcluster.KwokMachineSpec{ProvisioningDelay: delay, Node: localcluster.KwokNodeSpec{
		Labels:   labels,
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
	}}
	if allocatableCPU != "" {
		spec.Node.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatableCPU)}
	}
	return spec
}

// createGroup creates a MachineDeployment node group in the env.
func (e *capiEnv) createGroup(t *testing.T, ctx context.Context, name string, minSize, maxSize int, machine localcluster.KwokMachineSpec) {
	t.Helper()
	_, err := e.capi.CreateMachineDeployment(ctx, localcluster.MachineDeploymentGroup{
		Namespace: e.ns, Name: name, ClusterName: e.cluster, MinSize: minSize, MaxSize: maxSize, Machine: machine,
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *capiEnv) groupID(name string) string { return "MachineDeployment/" + e.ns + "/" + name }

// options are the autoscaler's options on the env: the clusterapi provider,
// discovering the env's namespace only.
func (e *capiEnv) options(t *testing.T) config.Options {
	opts := config.Defaults()
	opts.CloudProviderName = clusterapi.ProviderName
	opts.NodeGroupAutoDiscovery = []string{"clusterapi:namespace=" + e.ns}
	opts.LeaderElect = false
	opts.ScanInterval = time.Second
	opts.VisibilityLogFile = filepath.Join(t.TempDir(), "visibility.log")
	if e.capi.Management() != cluster {
		opts.CloudConfig = e.capi.Management().KubeconfigPath
	}
	return opts
}

// startAutoscaler builds an autoscaler on the workload cluster, whose loops
// the test runs.
func (e *capiEnv) startAutoscaler(t *testing.T, ctx context.Context, tweak func(*config.Options)) *app.Autoscaler {
	t.Helper()
	opts := e.options(t)
	if tweak != nil {
		tweak(&opts)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	a, err := app.New(runCtx, opts, cluster.Config, app.NewProcess(opts))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// replicas reads the spec.replicas of the env's MachineDeployments.
func (e *capiEnv) replicas(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	list, err := e.dynamic.Resource(capiMachineDeployments).Namespace(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, md := range list.Items {
		r, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
		out[md.GetName()] = int(r)
	}
	return out
}

// poolReplicas reads the spec.replicas of the env's MachinePool "mp".
func (e *capiEnv) poolReplicas(t *testing.T, ctx context.Context) int {
	t.Helper()
	mp, err := e.dynamic.Resource(capiMachinePools).Namespace(e.ns).Get(ctx, "mp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := unstructured.NestedInt64(mp.Object, "spec", "replicas")
	return int(r)
}

// machines lists the env's Machines by MachineDeployment: name, and whether
// it is deleting, has a node, or failed.
type machineInfo struct {
	name, deployment, node string
	deleting, failed       bool
}

func (e *capiEnv) machines(t *testing.T, ctx context.Context) []machineInfo {
	t.Helper()
	list, err := e.dynamic.Resource(capiMachines).Namespace(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []machineInfo
	for _, m := range list.Items {
		node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		reason, _, _ := unstructured.NestedString(m.Object, "status", "deprecated", "v1beta1", "failureReason")
		out = append(out, machineInfo{name: m.GetName(), deployment: m.GetLabels()[clusterapi.DeploymentNameLabel], node: node,
			deleting: m.GetDeletionTimestamp() != nil, failed: reason != ""})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// replicaWatch records every spec.replicas any MachineDeployment of the env
// ever had, from a watch, so that a test sees values that lasted between two
// of its reads too.
type replicaWatch struct {
	mu      sync.Mutex
	current map[string]int
	// worst is the highest sum over the deployments seen at any event.
	worst int
}

func watchReplicas(t *testing.T, ctx context.Context, e *capiEnv) *replicaWatch {
	t.Helper()
	w := &replicaWatch{current: map[string]int{}}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.dynamic, 0, e.ns, nil)
	informer := factory.ForResource(capiMachineDeployments).Informer()
	record := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		w.mu.Lock()
		defer w.mu.Unlock()
		w.current[u.GetName()] = int(r)
		sum := 0
		for _, n := range w.current {
			sum += n
		}
		w.worst = max(w.worst, sum)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *replicaWatch) highest() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.worst
}
