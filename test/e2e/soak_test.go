package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/localcluster"
)

// TestSoak is a randomized run, bounded in time, with a seed printed for replay:
// bursts of deployments across the tree's namespaces with random requests and
// priorities, every third of them a gang of 2 to 4 pods (a Workload API
// PodGroup or ACK's labels, in turn), random provisioning delays, injected provider failures, the
// autoscaler leader killed mid-provisioning (two replicas with leader election),
// scheduler restarts and short API server outages; and, in turns, gangs
// disturbed while they wait (a member relabelled to another gang or out of
// any, the whole gang deleted) and ResourceClaims shared by pods of a leaf
// (soak_gangs_test.go, soak_claims_test.go), while the oracle watches every
// node and pod event and every scale-up the autoscaler reports. It fails on
// any violation, on any error of a component, and unless every kind of
// operation happened at least soakMinimum times (fewer in a short soak, see
// minimumFor). make test runs it for 45s; QUOTASCALE_SOAK=10m (make soak)
// for longer, QUOTASCALE_SOAK_SEED to replay.
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

// soakPhase is how long the load grows, then shrinks.
const soakPhase = 15 * time.Second

// A soak must see each kind of operation at least soakMinimum times. Faults
// are the soak's own doing, every third operation, so a 45s soak already has
// a few of each; the workload's effects (scale-ups, quota refusals, reclaims,
// drains) need minutes: a 45s soak sees some of them, not reliably all, so
// their minimum grows with the duration, soakMinimum from 10 minutes on.
const (
	soakMinimum     = 3
	faultsFullFrom  = 45 * time.Second
	effectsFullFrom = 10 * time.Minute
)

// minimumFor scales soakMinimum to a soak shorter than full.
func minimumFor(duration, full time.Duration) int {
	return int(min(soakMinimum*duration/full, soakMinimum))
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

// soakCounts are what a soak did and saw happen.
type soakCounts struct {
	Operations        int
	ScaleUps          int // nodes registered
	QuotaRefusals     int // NotTriggerScaleUp events naming a CapacityQuota
	Reclaims          int // pods the scheduler preempted
	Drains            int // pods evicted from nodes marked for scale-down
	LeaderFailovers   int // a replica leading after another one did
	APIOutages        int
	SchedulerRestarts int
	ProviderFailures  int // times pool b was set to fail
	Gangs             int // gangs created, PodGroups and ACK's labels in turn
	GangsWhole        int // gangs seen with all their pods bound at once
	GangsRelabelled   int // waiting members moved to another gang
	GangLabelsRemoved int // waiting members moved out of any gang
	GangsDeleted      int // gangs deleted with none of their pods bound
	ClaimsShared      int // ResourceClaims created for 2 or 3 pods
	ClaimsSharedBound int // shared claims seen with all their pods bound
	ScaleUpsJudged    int // scale-ups reported for pods of the tree, judged by the oracle
}

// minimums are the counts a soak of duration must reach, each with its
// minimum, by name.
func (c soakCounts) minimums(duration time.Duration) map[string][2]int {
	faults, effects := minimumFor(duration, faultsFullFrom), minimumFor(duration, effectsFullFrom)
	return map[string][2]int{
		"scale-ups": {c.ScaleUps, effects}, "quota refusals": {c.QuotaRefusals, effects},
		"reclaims": {c.Reclaims, effects}, "scale-down drains": {c.Drains, effects},
		"leader failovers": {c.LeaderFailovers, faults}, "API outages": {c.APIOutages, faults},
		"scheduler restarts": {c.SchedulerRestarts, faults},
		"gangs bound whole":  {c.GangsWhole, effects},
		"gangs relabelled":   {c.GangsRelabelled, faults}, "gang labels removed": {c.GangLabelsRemoved, faults},
		"waiting gangs deleted": {c.GangsDeleted, faults}, "claims shared": {c.ClaimsShared, faults},
		"shared claims bound": {c.ClaimsSharedBound, effects}, "scale-ups judged": {c.ScaleUpsJudged, effects},
	}
}

// runSoak runs a soak of defaultDuration (QUOTASCALE_SOAK overrides it) on
// the infrastructure newInfra builds.
func runSoak(t *testing.T, defaultDuration time.Duration, newInfra func(*testing.T, context.Context, *rand.Rand) soakInfra) {
	duration, seed := soakParameters(t, defaultDuration)
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

	dra := newDRAWorld(t, ctx, strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), soakDevices, "")
	s := &soak{t: t, rng: rng, namespaces: soakQuotasAndNamespaces(t, ctx, dra.devicesResource()), deployments: map[string]string{},
		gangs: map[string]soakGang{}, trimmed: -1, dra: dra, shared: map[string]sharedClaim{}}
	checker := invariants(t)
	watchScaleUps(t, ctx, checker)
	s.infra = newInfra(t, ctx, rng)
	s.replicas = &autoscalerReplicas{infra: s.infra, visibility: filepath.Join(t.TempDir(), "visibility.log")}
	defer s.replicas.stopAll()
	s.replicas.start(runCtx)
	s.replicas.start(runCtx)

	// Every third operation is a fault, and every third a disturbance; the
	// four kinds of each take turns, in a random order each round, so that
	// each happens as often as the others and a short soak has them all. A
	// disturbance that could not happen (the gang it made to disturb did not
	// come in time) keeps its turn.
	var faults, disturbances []int
	s.start = time.Now()
	end := s.start.Add(duration)
	for time.Now().Before(end) {
		s.counts.Operations++
		switch s.counts.Operations % 3 {
		case 0:
			if len(faults) == 0 {
				faults = rng.Perm(4)
			}
			s.fault(ctx, runCtx, faults[0])
			faults = faults[1:]
		case 1:
			if len(disturbances) == 0 {
				disturbances = rng.Perm(4)
			}
			if s.disturb(ctx, disturbances[0]) {
				disturbances = disturbances[1:]
			}
		default:
			s.workload(ctx)
		}
		pause(ctx, time.Duration(200+rng.Intn(800))*time.Millisecond)
	}
	s.infra.configure(t, ctx, rng, false)
	// Let the last operations play out while the checker keeps watching.
	pause(ctx, 10*time.Second)
	s.replicas.stopAll()
	if r, ok := s.infra.(interface{ report(*testing.T) }); ok {
		r.report(t)
	}
	s.verdict(ctx, checker, duration, seed)
}

// soakParameters are the soak's duration and seed: the default duration and
// a new seed, unless QUOTASCALE_SOAK and QUOTASCALE_SOAK_SEED say otherwise.
func soakParameters(t *testing.T, defaultDuration time.Duration) (time.Duration, int64) {
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
	return duration, seed
}

// soakQuotasAndNamespaces applies the soak's tree, whose leaves hold at most
// 2 devices of the class devices names, CapacityQuotas and priority classes,
// and returns its namespaces: four on the tree's leaves and two outside it,
// whose pods no tree limits and scale-down need not keep room for.
func soakQuotasAndNamespaces(t *testing.T, ctx context.Context, devices string) [6]string {
	var namespaces [6]string
	for i := range namespaces {
		namespaces[i] = createNamespace(t, ctx, "")
	}
	applyTree(t, ctx, soakTree([4]string(namespaces[:4]), devices))
	for _, q := range soakQuotas() {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
		if err != nil {
			t.Fatal(err)
		}
		raw["apiVersion"], raw["kind"] = "autoscaling.x-k8s.io/v1beta1", "CapacityQuota"
		applyCapacityQuotas(t, ctx, mustJSON(t, raw))
	}
	for name, value := range map[string]int32{"e2e-soak-low": 0, "e2e-soak-high": 1000} {
		createPriorityClass(t, ctx, name, value)
	}
	return namespaces
}

// soak is one soak's running state.
type soak struct {
	t           *testing.T
	rng         *rand.Rand
	namespaces  [6]string
	infra       soakInfra
	replicas    *autoscalerReplicas
	counts      soakCounts
	deployments map[string]string // name -> namespace
	// gangs are workloads whose pods are one gang, by deployment name;
	// they are created and deleted whole, never scaled.
	gangs   map[string]soakGang
	created int // workloads created
	start   time.Time
	// trimmed is the last shrink phase that trimmed the workloads.
	trimmed time.Duration
	// dra is the node whose devices the shared claims take; shared the
	// last shared claim of each leaf's namespace.
	dra    draWorld
	shared map[string]sharedClaim
}

// disturb disturbs a waiting gang, or shares a claim, by kind; false when
// it could not.
func (s *soak) disturb(ctx context.Context, kind int) bool {
	switch kind {
	case 0:
		return s.relabelMember(ctx, false)
	case 1:
		return s.relabelMember(ctx, true)
	case 2:
		return s.deleteWaitingGang(ctx)
	default:
		s.shareClaim(ctx)
		return true
	}
}

// fault injects one fault of the given kind.
func (s *soak) fault(ctx, runCtx context.Context, kind int) {
	switch kind {
	case 0:
		s.replicas.killLeader()
		s.replicas.start(runCtx)
	case 1:
		s.counts.SchedulerRestarts++
		cluster.StopScheduler()
		if err := cluster.StartScheduler(ctx, localcluster.SchedulerOptions{}); err != nil {
			s.t.Fatalf("restarting the scheduler: %v", err)
		}
	case 2:
		failing := s.rng.Intn(2) == 0
		if failing {
			s.counts.ProviderFailures++
		}
		s.infra.configure(s.t, ctx, s.rng, failing)
	case 3:
		s.counts.APIOutages++
		cluster.SetAPIAvailable(false)
		pause(ctx, time.Duration(500+s.rng.Intn(2000))*time.Millisecond)
		cluster.SetAPIAvailable(true)
	}
}

// workload creates, scales or deletes one workload. The load grows and
// shrinks in turns, so that the autoscaler meets both the quotas and nodes to
// drain.
func (s *soak) workload(ctx context.Context) {
	t, rng := s.t, s.rng
	create, scale := 45, 75
	phase := time.Since(s.start) / soakPhase
	growing := phase%2 == 0
	if !growing {
		// Mostly down to one pod each, some deleted: single pods
		// scattered over half-empty nodes are what scale-down
		// consolidates by draining nodes.
		create, scale = 0, 80
		if phase != s.trimmed {
			// The shrink starts with the teams dropping the pods
			// that wait. Otherwise the pods the quotas held back
			// take the room the shrink frees, and nodes are never
			// left with a few pods that fit elsewhere: the nodes
			// scale-down drains.
			s.trimmed = phase
			trimToBound(t, ctx, s.deployments)
			s.dropWaitingGangs(ctx)
		}
	}
	switch op := rng.Intn(100); {
	case op < create:
		name := fmt.Sprintf("soak-%d", s.counts.Operations)
		ns := s.namespaces[rng.Intn(len(s.namespaces))]
		cpu := fmt.Sprintf("%dm", 500*(1+rng.Intn(6)))
		prio := []string{"e2e-soak-low", "e2e-soak-high"}[rng.Intn(2)]
		// A third of the workloads is pinned to pool a, which its
		// CapacityQuota keeps small.
		pool := map[string]string{"soak": "true"}
		if rng.Intn(3) == 0 {
			pool["pool"] = "a"
		}
		// Every third workload is a gang.
		s.created++
		if s.created%3 == 2 {
			s.createGang(ctx, ns, name, cpu, prio, pool)
			break
		}
		createSoakDeployment(t, ctx, ns, name, int32(1+rng.Intn(5)), cpu, prio, pool, nil)
		s.deployments[name] = ns
	case op < scale:
		if name, ns, ok := pick(rng, s.deployments); ok {
			n := rng.Intn(6)
			if !growing {
				n = 1
			}
			scaleDeployment(t, ctx, ns, name, int32(n))
		}
	default:
		all := maps.Clone(s.deployments)
		for name, g := range s.gangs {
			all[name] = g.namespace
		}
		if name, ns, ok := pick(rng, all); ok {
			if _, isGang := s.gangs[name]; isGang {
				s.deleteGang(ctx, name)
				break
			}
			if err := cluster.Client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting deployment %s/%s: %v", ns, name, err)
			}
			delete(s.deployments, name)
		}
	}
}

// verdict reports the soak's counts and fails it on any violation the oracle
// found, any autoscaler error, or an operation kind seen too rarely.
func (s *soak) verdict(ctx context.Context, checker *invariantChecker, duration time.Duration, seed int64) {
	t := s.t
	oracleCounts := checker.Counts()
	s.counts.ScaleUps, s.counts.Reclaims, s.counts.Drains = checker.NodesAdded(), oracleCounts.Reclaims, oracleCounts.Drained
	s.counts.GangsWhole, s.counts.ScaleUpsJudged = oracleCounts.GangsWhole, oracleCounts.ScaleUpsJudged
	s.countSharedBound(ctx)
	s.counts.LeaderFailovers = s.replicas.failovers()
	refusals, err := quotaRefusals(ctx, s.namespaces[:])
	if err != nil {
		t.Fatal(err)
	}
	s.counts.QuotaRefusals = refusals
	violations, unjudged := checker.Verdict()
	t.Logf("soak counts: %+v", s.counts)
	t.Logf("soak: %d violations, %d evictions unjudged, seed %d", len(violations), len(unjudged), seed)
	for _, e := range s.replicas.errors() {
		t.Errorf("autoscaler: %v", e)
	}
	for name, m := range s.counts.minimums(duration) {
		t.Logf("soak minimum: %s %d of at least %d", name, m[0], m[1])
		if m[0] < m[1] {
			t.Errorf("%s happened %d times, fewer than %d (seed %d)", name, m[0], m[1], seed)
		}
	}
}

// quotaRefusals counts the NotTriggerScaleUp events, repeats included, whose
// pods a CapacityQuota kept from a scale-up.
func quotaRefusals(ctx context.Context, namespaces []string) (int, error) {
	n := 0
	for _, ns := range namespaces {
		events, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=NotTriggerScaleUp"})
		if err != nil {
			return 0, fmt.Errorf("events of namespace %s: %w", ns, err)
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, `exceeded quota: "CapacityQuota/`) {
				n += int(max(e.Count, 1))
			}
		}
	}
	return n, nil
}

// soakTree is two teams of two leaves under a root whose max (16 cpu) is
// well below what the quotas let the pools hold, so that leaves borrow and
// get reclaimed from, and scale-down, which keeps the root's min allocatable,
// has nodes to remove once the pods outside the tree shrink. Each leaf holds
// at most 2 devices: one shared claim's.
func soakTree(namespaces [4]string, devices string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    min: {cpu: 16}
    max: {cpu: 16}
    children:
    - name: root.a
      min: {cpu: 8}
      max: {cpu: 16}
      children:
      - {name: root.a.1, namespaces: [%[1]s], min: {cpu: 3}, max: {cpu: 10, %[5]q: 2}}
      - {name: root.a.2, namespaces: [%[2]s], min: {cpu: 3}, max: {cpu: 10, %[5]q: 2}}
    - name: root.b
      min: {cpu: 8}
      max: {cpu: 16}
      children:
      - {name: root.b.1, namespaces: [%[3]s], min: {cpu: 3}, max: {cpu: 10, %[5]q: 2}}
      - {name: root.b.2, namespaces: [%[4]s], min: {cpu: 3}, max: {cpu: 10, %[5]q: 2}}
`, namespaces[0], namespaces[1], namespaces[2], namespaces[3], devices))
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
		quota("e2e-soak-pool-a", map[string]string{"pool": "a"}, "cpu", "8"),
		quota("e2e-soak-nodes", map[string]string{"soak": "true"}, "nodes", "8"),
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

// createSoakDeployment creates a deployment of replicas pods of cpu; member,
// when set, makes its pods members of a gang.
func createSoakDeployment(t *testing.T, ctx context.Context, ns, name string, replicas int32, cpu, priorityClass string,
	nodeSelector map[string]string, member func(*corev1.Pod)) {
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
					NodeSelector:                  nodeSelector,
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
				},
			},
		},
	}
	if member != nil {
		// The selector keeps to the app label.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)}, Spec: d.Spec.Template.Spec}
		member(pod)
		d.Spec.Template.ObjectMeta, d.Spec.Template.Spec = pod.ObjectMeta, pod.Spec
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

func scaleDeployment(t *testing.T, ctx context.Context, ns, name string, replicas int32) {
	t.Helper()
	// The deployment controller writes the object too: retry on conflicts.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cluster.Client.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = cluster.Client.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Errorf("scaling deployment %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// trimToBound scales each deployment down to its pods that are bound to a
// node; replica sets remove pending pods first.
func trimToBound(t *testing.T, ctx context.Context, deployments map[string]string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(deployments)) {
		ns := deployments[name]
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Errorf("listing the pods of deployment %s/%s: %v", ns, name, err)
			continue
		}
		bound, live := 0, 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if live > bound {
			scaleDeployment(t, ctx, ns, name, int32(bound))
		}
	}
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
// leader is a crash, mid-provisioning or not. Each replica is wired as the
// binary's main wires it: one Process, serving metrics and the health check,
// for the life of the replica, and the autoscaler built anew each time it
// leads.
type autoscalerReplicas struct {
	infra      soakInfra
	visibility string

	mu       sync.Mutex
	replicas []*replica
	leads    int     // times any replica started leading
	errs     []error // what replicas' main wiring returned or failed on
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
	opts.Address = "127.0.0.1:0"
	opts.ScanInterval = 500 * time.Millisecond
	opts.LeaderElect = true
	opts.LeaderElectLease, opts.LeaderElectRenew, opts.LeaderElectRetry = 2*time.Second, 1500*time.Millisecond, 250*time.Millisecond
	// The soak compresses upstream's clock: a leader's term lasts seconds
	// (a failover every few), so a node must be unneeded for about two loops,
	// and a node found unremovable while the load grew is looked at again
	// seconds later, when the load shrinks, not five minutes later.
	opts.ScaleDownUnneededTime = time.Second
	opts.ScaleDownDelayAfterAdd = time.Second
	opts.UnremovableNodeRecheckTimeout = 5 * time.Second
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
		if err := r.runProcess(runCtx, cancel, opts, rep); err != nil {
			r.fail(err)
		}
	}()
	r.mu.Lock()
	r.replicas = append(r.replicas, rep)
	r.mu.Unlock()
}

// runProcess is one replica's pod: its autoscaler process, restarted after it
// exits on a lost lease as upstream's does (the kubelet's restart). Any other
// end of the process is its error; being killed (ctx ending) is no error.
func (r *autoscalerReplicas) runProcess(ctx context.Context, exit context.CancelFunc, opts config.Options, rep *replica) error {
	for {
		processCtx, stop := context.WithCancel(ctx)
		err := r.runOneProcess(processCtx, exit, opts, rep)
		stop()
		if ctx.Err() != nil || !errors.Is(err, app.ErrLostLease) {
			return err
		}
	}
}

// runOneProcess is one autoscaler process after its flags are parsed, as the
// binary's main runs it; a failure to build the autoscaler ends the process
// with that error.
func (r *autoscalerReplicas) runOneProcess(ctx context.Context, exit context.CancelFunc, opts config.Options, rep *replica) error {
	process := app.NewProcess(opts)
	if _, err := process.Serve(ctx, opts.Address); err != nil {
		return err
	}
	var buildErr error
	err := app.RunWithLeaderElection(ctx, opts, cluster.Config, func(ctx context.Context) {
		a, err := app.New(ctx, opts, cluster.Config, process)
		if ctx.Err() != nil {
			return // lost the lease or killed while building: the binary waits to lead again
		}
		if err != nil {
			buildErr = fmt.Errorf("building the autoscaler: %w", err)
			exit()
			return
		}
		r.mu.Lock()
		r.leads++
		r.mu.Unlock()
		rep.leading.Store(true)
		defer rep.leading.Store(false)
		a.Run(ctx)
	})
	if buildErr != nil {
		return buildErr
	}
	if ctx.Err() != nil {
		return nil // killed
	}
	return err
}

func (r *autoscalerReplicas) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *autoscalerReplicas) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// failovers counts the times a replica took over from one that led before.
func (r *autoscalerReplicas) failovers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.leads-1, 0)
}

// killLeader stops the replica that leads (or the oldest, when none leads yet).
func (r *autoscalerReplicas) killLeader() {
	r.mu.Lock()
	if len(r.replicas) == 0 {
		r.mu.Unlock()
		return
	}
	victim := 0
	for i, rep := range r.replicas {
		if rep.leading.Load() {
			victim = i
		}
	}
	rep := r.replicas[victim]
	r.replicas = append(r.replicas[:victim], r.replicas[victim+1:]...)
	r.mu.Unlock()
	// Unlocked: the replica may record an error or a lead while it stops.
	rep.cancel()
	<-rep.done
}

func (r *autoscalerReplicas) stopAll() {
	r.mu.Lock()
	stopping := r.replicas
	r.replicas = nil
	r.mu.Unlock()
	for _, rep := range stopping {
		rep.cancel()
		<-rep.done
	}
}

func mustJSON(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// watchScaleUps feeds the checker's oracle the scale-ups the autoscaler
// reports, a TriggeredScaleUp event on each pod they are for, until ctx ends.
// Only the soak feeds them: it is where the rule was checked to hold on a
// correct run, and other tests set up scale-ups the rule was not weighed
// against (pods of another scheduler in a governed namespace, autoscalers
// with other options).
func watchScaleUps(t *testing.T, ctx context.Context, checker *invariantChecker) {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(cluster.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=TriggeredScaleUp"
	}))
	report := func(obj any) {
		if e, ok := obj.(*corev1.Event); ok && e.InvolvedObject.Kind == "Pod" {
			checker.ScaleUpTriggered(e.InvolvedObject.UID, e.InvolvedObject.Name, e.Message)
		}
	}
	informer := factory.Core().V1().Events().Informer()
	if _, err := informer.AddEventHandler(whileRunning{ctx, cache.ResourceEventHandlerFuncs{
		AddFunc: report, UpdateFunc: func(_, obj any) { report(obj) },
	}}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the scale-up events informer did not sync")
	}
	t.Cleanup(factory.Shutdown)
}
