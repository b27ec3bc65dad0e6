package localcluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ClusterAPIOptions configure StartClusterAPI.
type ClusterAPIOptions struct {
	// Workload is the cluster whose nodes the machines become, which every
	// Cluster object's kubeconfig Secret points at; nil means the cluster the
	// controllers run on (a self-managed cluster).
	Workload *Cluster
}

// ClusterAPI is Cluster API running in this process on a cluster: the
// MachineDeployment, MachineSet, Machine and MachinePool controllers of
// sigs.k8s.io/cluster-api, its cluster cache, and localcluster's kwok-backed
// infrastructure provider. Nothing plays the control plane or the cluster
// infrastructure provider: CreateCluster reports a Cluster ready the way they
// would.
type ClusterAPI struct {
	management *Cluster
	workload   *Cluster
	cancel     context.CancelFunc
	done       chan struct{}
	stopOnce   sync.Once
}

// ControllerName is the manager name the controllers run under, as user agent
// and in events.
const ControllerName = "localcluster-cluster-api"

var (
	setLoggerOnce sync.Once
	// managers numbers the managers of the process: Cluster API names each
	// manager's informers, and a name may be used once per process.
	managers atomic.Int32
)

// StartClusterAPI installs Cluster API's CRDs and the kwok provider's, and
// starts the controllers on c until Stop or the cluster stops. ctx bounds only
// the start.
func (c *Cluster) StartClusterAPI(ctx context.Context, opts ClusterAPIOptions) (*ClusterAPI, error) {
	workload := opts.Workload
	if workload == nil {
		workload = c
	}
	capiCRDs, err := ClusterAPICRDs(ctx)
	if err != nil {
		return nil, err
	}
	infraCRDs, err := kwokInfraCRDs()
	if err != nil {
		return nil, err
	}
	if err := installCRDManifests(ctx, c.Config, append(capiCRDs, infraCRDs...)); err != nil {
		return nil, err
	}
	// controller-runtime warns on stderr, with a stack, when nothing set its
	// logger; route it through klog like every other component here.
	setLoggerOnce.Do(func() { ctrllog.SetLogger(klog.NewKlogr()) })

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	config := jsonConfig(restclient.AddUserAgent(c.Config, ControllerName))
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 klog.FromContext(ctx).WithName("cluster-api"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  setup.ManagerCacheOptions(scheme, fmt.Sprintf("%s-%d", ControllerName, managers.Add(1)), "", 10*time.Minute),
		Client:                 setup.ManagerClientOptions(),
		// Tests start more than one manager in a process (a management and a
		// workload cluster, restarts); controller names need not be unique.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the Cluster API manager: %w", err)
	}
	runCtx, cancel := context.WithCancel(klog.NewContext(c.background, klog.FromContext(ctx).WithName("cluster-api")))
	a := &ClusterAPI{management: c, workload: workload, cancel: cancel, done: make(chan struct{})}
	if err := a.setup(runCtx, mgr); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(a.done)
		if err := mgr.Start(runCtx); err != nil && runCtx.Err() == nil {
			klog.FromContext(runCtx).Error(err, "Cluster API controllers stopped")
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		a.Stop()
		return nil, fmt.Errorf("the Cluster API controllers' caches did not sync")
	}
	return a, nil
}

// setup wires the controllers the way Cluster API's own manager does, with
// its indexes and cluster cache.
func (a *ClusterAPI) setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("Cluster API indexes: %w", err)
	}
	secrets, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return fmt.Errorf("Cluster API secret client: %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(ControllerName, 50, 100),
	}, controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		return fmt.Errorf("Cluster API cluster cache: %w", err)
	}
	options := controller.Options{MaxConcurrentReconciles: 4}
	steps := []struct {
		name  string
		setup func() error
	}{
		{"Machine", func() error {
			return (&machine.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
				RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, options)
		}},
		{"MachineSet", func() error {
			return (&machineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
				PreflightChecks: sets.New[clusterv1.MachineSetPreflightCheck]()}).SetupWithManager(ctx, mgr, options)
		}},
		{"MachineDeployment", func() error {
			return (&machinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, options)
		}},
		{"MachinePool", func() error {
			return (&machinepool.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache}).SetupWithManager(ctx, mgr, options)
		}},
		{"KwokMachine", func() error {
			return (&kwokMachineReconciler{client: mgr.GetClient(), workload: a.workload.Client, now: time.Now}).setup(mgr)
		}},
		{"KwokMachinePool", func() error {
			return (&kwokMachinePoolReconciler{client: mgr.GetClient(), workload: a.workload.Client, now: time.Now}).setup(mgr)
		}},
		{"KwokMachineTemplate", func() error {
			return (&kwokMachineTemplateReconciler{client: mgr.GetClient()}).setup(mgr)
		}},
	}
	for _, s := range steps {
		if err := s.setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", s.name, err)
		}
	}
	return nil
}

// Stop stops the controllers and waits for them; it may be called more than
// once.
func (a *ClusterAPI) Stop() {
	a.stopOnce.Do(func() {
		a.cancel()
		<-a.done
	})
}

// Management is the cluster the Cluster API objects live on.
func (a *ClusterAPI) Management() *Cluster { return a.management }

// CreateCluster creates a Cluster object in namespace for the workload
// cluster, with the kubeconfig Secret Cluster API reads to reach it, and
// reports its infrastructure provisioned and its control plane initialized
// and available, as the providers of a running cluster would.
func (a *ClusterAPI) CreateCluster(ctx context.Context, namespace, name string) error {
	kubeconfig, err := os.ReadFile(a.workload.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("reading the workload kubeconfig: %w", err)
	}
	c, err := a.management.ctrlClient()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": kubeconfig},
	}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", namespace, secret.Name, err)
	}
	host, port := endpoint(a.workload.Config.Host)
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: port}},
	}
	if err := c.Create(ctx, cluster); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Cluster %s/%s: %w", namespace, name, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		return fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	now := metav1.Now()
	cluster.Status.Initialization = clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: ptr.To(true), ControlPlaneInitialized: ptr.To(true)}
	for _, t := range []string{clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition,
		clusterv1.ClusterControlPlaneAvailableCondition} {
		cluster.Status.Conditions = append(cluster.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue,
			Reason: "Provisioned", LastTransitionTime: now, ObservedGeneration: cluster.Generation})
	}
	cluster.Status.SetTypedPhase(clusterv1.ClusterPhaseProvisioned)
	if err := c.Status().Update(ctx, cluster); err != nil {
		return fmt.Errorf("reporting Cluster %s/%s ready: %w", namespace, name, err)
	}
	return nil
}

// endpoint splits https://host:port.
func endpoint(url string) (string, int32) {
	hostPort := strings.TrimPrefix(url, "https://")
	i := strings.LastIndex(hostPort, ":")
	if i < 0 {
		return hostPort, 443
	}
	port, err := strconv.ParseInt(hostPort[i+1:], 10, 32)
	if err != nil {
		return hostPort, 443
	}
	return hostPort[:i], int32(port)
}

// ctrlClient is a controller-runtime client with Cluster API's types.
func (c *Cluster) ctrlClient() (client.Client, error) {
	c.ctrlOnce.Do(func() {
		scheme := runtime.NewScheme()
		c.ctrlErr = clientgoscheme.AddToScheme(scheme)
		if c.ctrlErr == nil {
			c.ctrlErr = clusterv1.AddToScheme(scheme)
		}
		if c.ctrlErr == nil {
			c.ctrl, c.ctrlErr = client.New(jsonConfig(c.Config), client.Options{Scheme: scheme})
		}
	})
	if c.ctrlErr != nil {
		return nil, fmt.Errorf("controller-runtime client: %w", c.ctrlErr)
	}
	return c.ctrl, nil
}

// jsonConfig copies config to speak JSON: the loopback config asks for
// protobuf, which custom resources do not have.
func jsonConfig(config *restclient.Config) *restclient.Config {
	out := restclient.CopyConfig(config)
	out.ContentType = "application/json"
	out.AcceptContentTypes = ""
	return out
}
