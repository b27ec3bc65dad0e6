package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

// TestSoak is a randomized run, bounded in time, with a seed printed for replay:
// bursts of deployments across the tree's namespaces with random requests and
// priorities, random provisioning delays, injected provider failures, the
// autoscaler leader killed mid-provisioning (two replicas with leader election),
// scheduler restarts and short API server outages, while an invariant checker
// watches every node and pod event. make test runs it for 45s;
// QUOTASCALE_SOAK=10m (make soak) for longer, QUOTASCALE_SOAK_SEED to replay.
func TestSoak(t *testing.T) {
	runSoak(t, 45*time.Second, func(t *testing.T, ctx context.Context, rng *rand.Rand) soakInfra {
		return &kwokSoak{cloud: startKwokCloud(t, ctx, soakGroups(rng, false))}
	})
}

// TestSoakClusterAPI is the soak on Cluster API's own controllers: the pools
// are MachineDeployments whose machines take random times to provision, pool
// b's machines fail at times, and leaders die mid-provisioning. make test
// runs it for 30s; QUOTASCALE_SOAK sets both soaks' duration.
func TestSoakClusterAPI(t *testing.T) {
	runSoak(t, 30*time.Second, func(t *testing.T, ctx context.Context, rng *rand.Rand) soakInfra {
		e := newCAPIEnv(t, ctx, clusterAPI(t))
		c := &capiSoak{env: e}
		for _, g := range []struct {
			name, cpu string
			maxSize   int
		}{{"soak-a", "4", 10}, {"soak-b", "8", 6}} {
			e.createGroup(t, ctx, g.name, 0, g.maxSize, kwokMachine(g.cpu, "16Gi", "", "", map[string]string{"pool": g.name[len(g.name)-1:], "soak": "true"}))
		}
		c.configure(t, ctx, rng, false)
		c.watchMachines(t, ctx)
		return c
	})
}

// soakInfra is the infrastructure a soak runs on.
type soakInfra interface {
	// configure gives both pools random provisioning delays; failing makes
	// pool b's new machines fail as out of resources.
	configure(t *testing.T, ctx context.Context, rng *rand.Rand, failing bool)
	// options points an autoscaler at the infrastructure.
	options(o *config.Options)
}

type kwokSoak struct{ cloud *kwokCloudEnv }

func (k *kwokSoak) configure(_ *testing.T, _ context.Context, rng *rand.Rand, failing bool) {
	k.cloud.setConfig(soakGroups(rng, failing))
}

func (k *kwokSoak) options(o *config.Options) {
	o.CloudProviderName = "kwok"
	o.CloudConfig = "configmap:kube-system/" + k.cloud.configName
	o.KwokState = "kube-system/" + k.cloud.stateName
}

type capiSoak struct {
	env *capiEnv

	mu                        sync.Mutex
	created, failed, deleting map[string]bool
}

// watchMachines records what the soak did to Machines, for its report.
func (c *capiSoak) watchMachines(t *testing.T, ctx context.Context) {
	c.created, c.failed, c.deleting = map[string]bool{}, map[string]bool{}, map[string]bool{}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.env.dynamic, 0, c.env.ns, nil)
	record := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		reason, _, _ := unstructured.NestedString(u.Object, "status", "deprecated", "v1beta1", "failureReason")
		c.mu.Lock()
		defer c.mu.Unlock()
		c.created[u.GetName()] = true
		c.failed[u.GetName()] = c.failed[u.GetName()] || reason != ""
		c.deleting[u.GetName()] = c.deleting[u.GetName()] || u.GetDeletionTimestamp() != nil
	}
	if _, err := factory.ForResource(capiMachines).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
}

// report says what the soak did on Cluster API, and fails a soak that made
// no machine: it would have tested nothing of Cluster API.
func (c *capiSoak) report(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := func(m map[string]bool) int {
		n := 0
		for _, v := range m {
			if v {
				n++
			}
		}
		return n
	}
	t.Logf("Cluster API: %d machines created, %d failed to provision, %d deleted", len(c.created), count(c.failed), count(c.deleting))
	if len(c.created) == 0 {
		t.Errorf("the soak created no Machine")
	}
}

func (c *capiSoak) configure(t *testing.T, ctx context.Context, rng *rand.Rand, failing bool) {
	var failure *localcluster.KwokFailure
	if failing {
		failure = &localcluster.KwokFailure{OutOfResources: true, Code: "STOCKOUT", Message: "injected by the soak"}
	}
	for _, g := range []struct {
		name    string
		failure *localcluster.KwokFailure
	}{{"soak-a", nil}, {"soak-b", failure}} {
		delay := (time.Duration(rng.Intn(3000)) * time.Millisecond).String()
		if err := c.env.capi.SetMachineTemplate(ctx, c.env.ns, g.name, delay, g.failure); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *capiSoak) options(o *config.Options) {
	o.CloudProviderName = clusterapi.ProviderName
	o.NodeGroupAutoDiscovery = []string{"clusterapi:namespace=" + c.env.ns}
}

// runSoak runs a soak of defaultDuration (QUOTASCALE_SOAK overrides it) on
// the infrastructure newInfra builds.
func runSoak(t *testing.T, defaultDuration time.Duration, newInfra func(*testing.T, context.Context, *rand.Rand) soakInfra) {
	duration := defaultDuration
	if v := os.Getenv("QUOTASCALE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("QUOTASCALE_SOAK: %v", err)
		}
		duration = d
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("QUOTASCALE_SOAK_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("QUOTASCALE_SOAK_SEED: %v", err)
		}
		seed = s
	}
	t.Logf("soak for %s with QUOTASCALE_SOAK_SEED=%d", duration, seed)
	rng := rand.New(rand.NewSource(seed))
	// Longer than testContext's bound, which a long soak outlives.
	ctx, cancel := context.WithTimeout(t.Context(), duration+5*time.Minute)
	defer cancel()
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < duration+2*time.Minute {
		t.Fatalf("the test timeout leaves less than the soak duration plus two minutes; pass -timeout")
	}
	runCtx, cancelRun := context.WithTimeout(context.Background(), duration+10*time.Minute)
	defer cancelRun()

	var namespaces [4]string
	for i := range namespaces {
		namespaces[i] = createNamespace(t, ctx, "")
	}
	tree := applyTree(t, ctx, seedTreeFor(t, namespaces))
	quotas := soakQuotas()
	for _, q := range quotas {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
		if err != nil {
			t.Fatal(err)
		}
		raw["apiVersion"], raw["kind"] = "autoscaling.x-k8s.io/v1beta1", "CapacityQuota"
		applyCapacityQuotas(t, ctx, mustJSON(t, raw))
	}
	for name, value := range map[string]int32{"e2e-soak-low": 0, "e2e-soak-high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := cluster.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	checker := startInvariantChecker(t, ctx, tree, quotas)

	infra := newInfra(t, ctx, rng)
	replicas := &autoscalerReplicas{t: t, infra: infra, visibility: filepath.Join(t.TempDir(), "visibility.log")}
	defer replicas.stopAll()
	replicas.start(runCtx)
	replicas.start(runCtx)

	var ops, faults int
	deployments := map[string]string{} // name -> namespace
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		ops++
		switch op := rng.Intn(100); {
		case op < 35:
			name := fmt.Sprintf("soak-%d", ops)
			ns := namespaces[rng.Intn(len(namespaces))]
			cpu := fmt.Sprintf("%dm", 500*(1+rng.Intn(6)))
			prio := []string{"e2e-soak-low", "e2e-soak-high"}[rng.Intn(2)]
			createSoakDeployment(t, ctx, ns, name, int32(1+rng.Intn(5)), cpu, prio)
			deployments[name] = ns
		case op < 55:
			if name, ns, ok := pick(rng, deployments); ok {
				scaleDeployment(ctx, ns, name, int32(rng.Intn(6)))
			}
		case op < 70:
			if name, ns, ok := pick(rng, deployments); ok {
				_ = cluster.Client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
				delete(deployments, name)
			}
		case op < 78:
			faults++
			replicas.killLeader()
			replicas.start(runCtx)
		case op < 84:
			faults++
			cluster.StopScheduler()
			if err := cluster.StartScheduler(ctx, localcluster.SchedulerOptions{}); err != nil {
				t.Fatal(err)
			}
		case op < 92:
			faults++
			infra.configure(t, ctx, rng, rng.Intn(2) == 0)
		default:
			faults++
			cluster.SetAPIAvailable(false)
			pause(ctx, time.Duration(500+rng.Intn(2000))*time.Millisecond)
			cluster.SetAPIAvailable(true)
		}
		pause(ctx, time.Duration(200+rng.Intn(800))*time.Millisecond)
	}
	infra.configure(t, ctx, rng, false)
	// Let the last operations play out while the checker keeps watching.
	pause(ctx, 10*time.Second)
	if r, ok := infra.(interface{ report(*testing.T) }); ok {
		r.report(t)
	}
	reclaims, drained := checker.Counts()
	t.Logf("soak: %d operations, %d faults (autoscaler kills, scheduler restarts, provider failures, API outages), %d reclaim evictions, %d drained pods, %d violations, seed %d",
		ops, faults, reclaims, drained, len(checker.Violations()), seed)
}

func soakQuotas() []*autoscalingv1beta1.CapacityQuota {
	quota := func(name string, selector map[string]string, res, limit string) *autoscalingv1beta1.CapacityQuota {
		q := &autoscalingv1beta1.CapacityQuota{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: autoscalingv1beta1.CapacityQuotaSpec{
				Limits: autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{
					autoscalingv1beta1.ResourceName(res): resource.MustParse(limit)}},
			},
		}
		if selector != nil {
			q.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		}
		return q
	}
	return []*autoscalingv1beta1.CapacityQuota{
		quota("e2e-soak-pool-a", map[string]string{"pool": "a"}, "cpu", "24"),
		quota("e2e-soak-nodes", map[string]string{"soak": "true"}, "nodes", "9"),
	}
}

// soakGroups are two pools with random provisioning delays; failing makes pool
// b's new instances fail as out of resources.
func soakGroups(rng *rand.Rand, failing bool) string {
	failures := ""
	if failing {
		failures = "\n  failures: {outOfResources: true, errorCode: STOCKOUT, message: injected by the soak}"
	}
	return fmt.Sprintf(`
nodeGroups:
- name: e2e-kwok-soak-a
  minSize: 0
  maxSize: 10
  labels: {pool: a, soak: "true"}
  capacity: {cpu: "4", memory: 16Gi}
  provisioningDelay: %dms
- name: e2e-kwok-soak-b
  minSize: 0
  maxSize: 6
  labels: {pool: b, soak: "true"}
  capacity: {cpu: "8", memory: 32Gi}
  provisioningDelay: %dms%s
`, rng.Intn(3000), rng.Intn(3000), failures)
}

func createSoakDeployment(t *testing.T, ctx context.Context, ns, name string, replicas int32, cpu, priorityClass string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:             priorityClass,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector:                  map[string]string{"soak": "true"},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
				},
			},
		},
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

func scaleDeployment(ctx context.Context, ns, name string, replicas int32) {
	s, err := cluster.Client.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	s.Spec.Replicas = replicas
	_, _ = cluster.Client.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
}

func pick(rng *rand.Rand, m map[string]string) (string, string, bool) {
	if len(m) == 0 {
		return "", "", false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	k := keys[rng.Intn(len(keys))]
	return k, m[k], true
}

// pause waits, ending early when ctx does.
func pause(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// autoscalerReplicas are autoscaler processes with leader election; killing the
// leader is a crash, mid-provisioning or not.
type autoscalerReplicas struct {
	t          *testing.T
	infra      soakInfra
	visibility string

	mu       sync.Mutex
	replicas []*replica
}

type replica struct {
	cancel  context.CancelFunc
	done    chan struct{}
	leading atomic.Bool
}

func (r *autoscalerReplicas) start(ctx context.Context) {
	opts := config.Defaults()
	// The local cluster's scheduler enforces the tree as default-scheduler.
	opts.ElasticQuotaSchedulerNames = []string{corev1.DefaultSchedulerName}
	r.infra.options(&opts)
	opts.ScanInterval = 500 * time.Millisecond
	opts.LeaderElect = true
	opts.LeaderElectLease, opts.LeaderElectRenew, opts.LeaderElectRetry = 2*time.Second, 1500*time.Millisecond, 250*time.Millisecond
	opts.ScaleDownUnneededTime = 3 * time.Second
	opts.ScaleDownDelayAfterAdd = 2 * time.Second
	opts.ScaleDownDelayAfterFailure = 2 * time.Second
	opts.MaxGracefulTerminationSec = 2
	opts.MaxPodEvictionTime = 0
	opts.NodeDeleteDelayAfterTaint = 0
	opts.StaleDataBound = 2 * time.Second
	opts.MaxNodeProvisionTime = 20 * time.Second
	opts.InitialNodeGroupBackoffDuration = 2 * time.Second
	opts.MaxNodeGroupBackoffDuration = 10 * time.Second
	opts.VisibilityLogFile = r.visibility
	runCtx, cancel := context.WithCancel(ctx)
	rep := &replica{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rep.done)
		_ = app.RunWithLeaderElection(runCtx, opts, cluster.Config, func(ctx context.Context) {
			a, err := app.New(ctx, opts, cluster.Config, app.NewProcess(opts))
			if err != nil {
				return
			}
			rep.leading.Store(true)
			defer rep.leading.Store(false)
			a.Run(ctx)
		})
	}()
	r.mu.Lock()
	r.replicas = append(r.replicas, rep)
	r.mu.Unlock()
}

// killLeader stops the replica that leads (or the oldest, when none leads yet).
func (r *autoscalerReplicas) killLeader() {
	r.mu.Lock()
	defer r.mu.Unlock()
	victim := 0
	for i, rep := range r.replicas {
		if rep.leading.Load() {
			victim = i
		}
	}
	if len(r.replicas) == 0 {
		return
	}
	rep := r.replicas[victim]
	rep.cancel()
	<-rep.done
	r.replicas = append(r.replicas[:victim], r.replicas[victim+1:]...)
}

func (r *autoscalerReplicas) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.replicas {
		rep.cancel()
		<-rep.done
	}
	r.replicas = nil
}

func mustJSON(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
