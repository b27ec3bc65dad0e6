// Package capacityscheduling is the kube-scheduler plugin that enforces an
// ElasticQuotaTree (scheduling.sigs.k8s.io/v1beta1, as in Alibaba Cloud ACK): a
// pod is admitted only if its quota leaf and every ancestor stay within max on
// every resource it requests; a leaf below its min reclaims borrowed capacity by
// preemption; a ResourceFlavor pins a quota node's pods to the flavor's nodes.
// Every decision is made by the shared accounting library, quota/elastic, so the
// scheduler and the autoscaler never disagree.
package capacityscheduling

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/clock"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/pkg/typedinformer"
	"github.com/quotascale/quotascale/quota/elastic"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "CapacityScheduling"

const stateKey fwk.StateKey = Name

var (
	treesResource   = schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")
	flavorsResource = kueuev1beta1.SchemeGroupVersion.WithResource("resourceflavors")
)

// Plugin is the CapacityScheduling plugin.
type Plugin struct {
	handle    fwk.Handle
	args      Args
	cache     *quotaCache
	trees     cache.SharedIndexInformer
	podsReady func() bool
	// podsSynced remembers podsReady's true, under the cache's lock.
	podsSynced bool
	// dynamic looks up ResourceFlavors the informer has not seen yet, for the
	// webhook; nil in unit tests.
	dynamic dynamic.Interface
	// reclaimer runs this plugin's reclaim (preemption.Interface on Plugin);
	// preemptor runs DefaultPreemption's victim choice within quota
	// (quotaPreemption); defaultPreemption is upstream's plugin itself, for
	// pods no tree governs. All three share one Executor.
	reclaimer         *preemption.Evaluator
	preemptor         *preemption.Evaluator
	defaultPreemption *defaultpreemption.DefaultPreemption
}

var (
	_ fwk.PreFilterPlugin          = &Plugin{}
	_ fwk.FilterPlugin             = &Plugin{}
	_ fwk.ReservePlugin            = &Plugin{}
	_ fwk.PostFilterPlugin         = &Plugin{}
	_ fwk.PreEnqueuePlugin         = &Plugin{}
	_ fwk.PermitPlugin             = &Plugin{}
	_ fwk.PodGroupPostFilterPlugin = &Plugin{}
	_ fwk.EnqueueExtensions        = &Plugin{}
	_ preemption.Interface         = &Plugin{}
)

// New builds the plugin for a scheduler that does not say whether it leads:
// it writes no tree status. Leadership.Factory builds one that does.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return build(ctx, obj, h, nil)
}

// build builds the plugin: it starts the tree and flavor informers and waits
// until its handlers have seen every tree and flavor, registers pod handlers on
// the scheduler's own pod informer, and starts the status writer and the hold
// sweep. ctx lives as long as the scheduler.
func build(ctx context.Context, obj runtime.Object, h fwk.Handle, leadership *Leadership) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: dynamic client: %w", Name, err)
	}
	trees := typedinformer.New[schedulingv1beta1.ElasticQuotaTree](dyn, treesResource, 0)
	flavors := typedinformer.New[kueuev1beta1.ResourceFlavor](dyn, flavorsResource, 0)
	p, err := newPlugin(ctx, h, args, trees, flavors, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	p.dynamic = dyn
	if args.Webhook != nil {
		if err := p.serveWebhook(ctx, *args.Webhook); err != nil {
			return nil, err
		}
	}
	if *args.WriteStatus {
		p.startStatusWriter(ctx, dyn, leadership)
	}
	return p, nil
}

// newPlugin is New with the informers and the clock given, for tests.
func newPlugin(ctx context.Context, h fwk.Handle, args Args, trees, flavors cache.SharedIndexInformer, clk clock.PassiveClock) (*Plugin, error) {
	logger := klog.FromContext(ctx).WithName(Name)
	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	p := &Plugin{
		handle: h,
		args:   args,
		cache:  newQuotaCache(podInformer.Lister(), clk, args.ReclaimHoldDuration.Duration),
		trees:  trees,
	}
	p.cache.podGroup = podGroupLister(h)
	if *args.WriteStatus {
		p.cache.exportMetrics()
	}
	synced, err := p.registerHandlers(logger, podInformer.Informer(), flavors)
	if err != nil {
		return nil, err
	}
	if err := p.registerClaimHandlers(h); err != nil {
		return nil, err
	}
	go trees.RunWithContext(ctx)
	go flavors.RunWithContext(ctx)
	// The handlers, not only the informers, must have seen every tree and
	// flavor: the first cycle must find the tree in force.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("%s: ElasticQuotaTree and ResourceFlavor handlers did not sync", Name)
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	if p.defaultPreemption, err = defaultpreemption.New(ctx, args.defaultPreemption(), h, fts); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	// Every preemption records the victims it chose, to mark them leaving.
	exec := p.defaultPreemption.Executor
	p.defaultPreemption.Evaluator = preemption.NewEvaluator(defaultpreemption.Name, h, recordingVictims{p.defaultPreemption}, exec)
	p.reclaimer = preemption.NewEvaluator(Name, h, recordingVictims{p}, exec)
	p.preemptor = preemption.NewEvaluator(Name, h, recordingVictims{&quotaPreemption{DefaultPreemption: p.defaultPreemption, plugin: p}}, exec)
	go wait.UntilWithContext(klog.NewContext(ctx, logger), p.sweepHolds, args.holdSweepInterval())
	return p, nil
}

// sweepHolds ends the expired holds and moves the pods they alone kept out to
// the active queue. No cluster event says that the quota came free: without
// this, such a pod would wait for the queue's periodic flush of unschedulable
// pods (podMaxInUnschedulablePodsDuration, 5 minutes by default).
func (p *Plugin) sweepHolds(ctx context.Context) {
	logger := klog.FromContext(ctx)
	keptOut, err := p.cache.sweepHolds()
	if err != nil {
		logger.Error(err, "Finding the pods expired reclaim holds kept out; they wait for the next requeue")
	}
	if len(keptOut) == 0 {
		return
	}
	pods := make(map[string]*corev1.Pod, len(keptOut))
	for _, pod := range keptOut {
		pods[pod.Namespace+"/"+pod.Name] = pod
	}
	logger.V(4).Info("Activating the pods an expired reclaim hold kept out", "pods", len(pods))
	// Outside the cache's lock: the queue calls this plugin's queueing hints
	// under its own lock, and they take the cache's.
	p.handle.Activate(logger, pods)
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return Name }

// stateData is what PreFilter learned about the pod, for the later extension
// points of the same cycle. No state means the pod is not governed: no tree is
// in force or no leaf lists its namespace.
type stateData struct {
	request elastic.Request
	verdict elastic.Verdict
	// rebuilding is set while usage is still being rebuilt after a start:
	// nothing is decided, and nothing preempts.
	rebuilding bool
	// flavor and flavorLabels pin the pod to the flavor's nodes; flavor is empty
	// when the pod's quota node names none.
	flavor       string
	flavorLabels map[string]string
	// plan is the reclaim PostFilter computed; the preemption dry run reads it.
	plan *reclaimPlan
	// gang is set for a member of a gang not wholly admitted yet;
	// gangBlocked when the pod's gang cannot be read, or waits for pods.
	gang        *gangAsk
	gangBlocked bool
	// seen is what the cache computed for the pod PreFilter saw, which
	// Reserve charges: it is handed a copy of that pod.
	seen podRequests
}

// Clone shares everything: nothing in the state changes after PreFilter but the
// plan, which is set once before the dry run copies the state.
func (s *stateData) Clone() fwk.StateData { return s }

// PreFilter admits the pod against its quota leaf and every ancestor, all
// resources or none. A refusal names the quota node, the resource and the numbers.
// It is UnschedulableAndUnresolvable on purpose: removing pods from one node does
// not change quota, so node-local preemption must not try; this plugin's
// PostFilter reclaims across nodes instead.
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	markPodGroupReached(state)
	p.cache.mu.Lock()
	tree := p.cache.tree
	if tree == nil {
		p.cache.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Skip)
	}
	leaf, governed := tree.LeafFor(pod.Namespace)
	if !governed {
		p.cache.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !p.podsSyncedLocked() {
		p.cache.mu.Unlock()
		state.Write(stateKey, &stateData{rebuilding: true})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "quota usage is being rebuilt from the assigned pods")
	}
	var request elastic.Request
	var verdict elastic.Verdict
	var ask *gangAsk
	var seen podRequests
	var gangErr error
	var message string
	firstNever := false
	if tree.Tracks(pod.UID) {
		// A pod already charged is being moved, in the autoscaler's scale-down
		// simulation (which clears its node): its quota does not change, only
		// its node. (The scheduler itself never sees a charged pod again:
		// Reserve charges it on its way to being bound.) The simulation's copy
		// is not remembered: no informer event would ever drop it.
		charge, _ := p.cache.chargeLocked(pod)
		request = tree.Request(charge.Own)
		verdict = elastic.Verdict{Leaf: leaf.Name()}
	} else {
		request = p.cache.requestLocked(pod)
		if err := p.cache.claimProblemLocked(pod); err != nil {
			p.cache.mu.Unlock()
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "quota cannot charge the pod's devices: "+err.Error())
		}
		seen = p.cache.requests[pod.UID]
		ask, verdict, gangErr = p.cache.admitPendingLocked(pod, request)
		// A reclaim's trial admits a gang as if the victims were gone: it
		// stays refused, and counts as neither admitted nor refused.
		trial := ask != nil && p.cache.trial.covers(ask.key)
		switch {
		case gangErr != nil, ask == nil, trial:
		case !verdict.Admitted():
			message = gangRefusal(ask, verdict)
			firstNever = p.cache.noteGangRefusalLocked(ask, message)
		default:
			delete(p.cache.gangRefusals, ask.key)
		}
		if !trial {
			p.cache.decidedLocked(pod.UID, verdict)
		}
	}
	flavor := leaf.ResourceFlavor()
	flavorLabels, flavorFound := p.cache.flavors[flavor]
	p.cache.mu.Unlock()

	if gangErr != nil {
		state.Write(stateKey, &stateData{request: request, gangBlocked: true})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, gangErr.Error())
	}
	state.Write(stateKey, &stateData{request: request, verdict: verdict, flavor: flavor, flavorLabels: flavorLabels, gang: ask, seen: seen})
	if firstNever {
		if recorder := p.handle.EventRecorder(); recorder != nil {
			recorder.Eventf(pod, nil, corev1.EventTypeWarning, eventReasonGangNeverFits, "Scheduling", "%s", message)
		}
	}
	if message == "" {
		message = verdict.Message()
	}
	if !verdict.Admitted() {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, message)
	}
	if flavor == "" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !flavorFound {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("ResourceFlavor %q of quota node %q does not exist", flavor, verdict.Leaf))
	}
	return nil, nil
}

// podsSyncedLocked says whether the pod and claim handlers have seen every
// object once since the start.
func (p *Plugin) podsSyncedLocked() bool {
	// They stay synced once they are; asking costs a lock.
	if p.podsSynced {
		return true
	}
	if !p.podsReady() {
		return false
	}
	// The pods may have been charged before their claims and DeviceClasses
	// were seen.
	p.cache.rechargeAllLocked()
	p.podsSynced = true
	return true
}

// PreFilterExtensions is nil: quota is not per node, so adding or removing a pod
// on one node in a what-if changes nothing Filter checks.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps the pod on nodes carrying every label of its quota node's
// ResourceFlavor.
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	for k, v := range s.flavorLabels {
		if node.Labels[k] != v {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("node(s) didn't match ResourceFlavor %q of quota node %q", s.flavor, s.verdict.Leaf))
		}
	}
	return nil
}

// Reserve charges the pod to its quota path before binding, so the next cycle
// sees it. Admission is re-checked under the write lock: an informer may have
// charged a pod since PreFilter.
func (p *Plugin) Reserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		// PreFilter skipped the pod: not governed, or no tree.
		return nil
	}
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	if p.cache.tree == nil {
		return nil
	}
	if p.cache.trial.reserve(pod) {
		return nil
	}
	if s.gang != nil {
		return p.reserveGangLocked(pod, s)
	}
	return p.reserveAloneLocked(pod, s)
}

// Unreserve releases what Reserve charged when binding fails, or when a pod
// group cycle is undone: kube-scheduler reserves every pod of a group,
// reverts them all, then reserves them again for binding. A preemptor's hold
// survives it: the reclaim is still owed to the pod.
func (p *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) {
	p.unreserveGang(ctx, pod, p.cache.unreserve(pod, inPodGroupCycle(state)))
}

// PreEnqueue keeps a preemptor out of the queue while the API calls of its
// preemption are in flight, as DefaultPreemption does (SchedulerAsyncPreemption).
func (p *Plugin) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	return p.defaultPreemption.PreEnqueue(ctx, pod)
}

// PostFilter preempts as kube-scheduler does, within quota:
//   - a pod no tree governs preempts exactly as DefaultPreemption would;
//   - a pod its quota admitted preempts lower-priority pods for node room as
//     DefaultPreemption picks them, taking no other owner below its min
//     (quotaPreemption);
//   - a pod its quota refused reclaims: the library plans which pods of quota
//     nodes above their min to evict, and the framework's preemption machinery
//     picks a node, nominates the pod and evicts the victims.
func (p *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(state)
	switch {
	case err != nil:
		return p.preemptRecording(state, func() (*fwk.PostFilterResult, *fwk.Status) {
			return p.defaultPreemption.PostFilter(ctx, state, pod, m)
		})
	case s.rebuilding:
		return nil, fwk.NewStatus(fwk.Unschedulable, "quota usage is being rebuilt from the assigned pods")
	case s.gangBlocked:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: the pod's gang is not ready to ask its quota")
	case s.gang != nil && s.gang.never:
		// Only a larger max can help: reclaiming would evict for nothing.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "reclaim: the gang exceeds a max of its quota")
	case s.verdict.Admitted():
		schedulermetrics.PreemptionAttempts.Inc()
		result, status := p.preemptRecording(state, func() (*fwk.PostFilterResult, *fwk.Status) {
			return p.preemptor.Preempt(ctx, state, pod, m)
		})
		return result, prefixed("preemption: ", status)
	}
	// A gang reclaims for all of it or not at all.
	wanted := s.request.Requests()
	if s.gang != nil && s.gang.whole != nil {
		wanted = s.gang.whole
	}
	plan, status := p.planEligibleReclaim(ctx, pod, wanted)
	if !status.IsSuccess() {
		return nil, status
	}
	result, status := p.runReclaim(ctx, state, s, pod, s.verdict.Leaf, wanted, plan, m)
	return result, prefixed("reclaim: ", status)
}

func prefixed(prefix string, status *fwk.Status) *fwk.Status {
	if msg := status.Message(); msg != "" {
		return fwk.NewStatus(status.Code(), prefix+msg)
	}
	return status
}

func readState(state fwk.CycleState) (*stateData, error) {
	c, err := state.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := c.(*stateData)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected state type %T", Name, c)
	}
	return s, nil
}
