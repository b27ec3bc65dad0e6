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
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/internal/typedinformer"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
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
	evaluator *preemption.Evaluator
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ preemption.Interface  = &Plugin{}
)

// New builds the plugin: it starts the tree and flavor informers and waits for
// them, registers pod handlers on the scheduler's own pod informer, and starts the
// status writer. ctx lives as long as the scheduler.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	logger := klog.FromContext(ctx).WithName(Name)
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: dynamic client: %w", Name, err)
	}
	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	p := &Plugin{
		handle: h,
		args:   args,
		cache:  newQuotaCache(podInformer.Lister()),
		trees:  typedinformer.New[schedulingv1beta1.ElasticQuotaTree](dyn, treesResource, 0),
	}
	flavors := typedinformer.New[kueuev1beta1.ResourceFlavor](dyn, flavorsResource, 0)
	if err := p.registerHandlers(logger, podInformer.Informer(), flavors); err != nil {
		return nil, err
	}
	go p.trees.RunWithContext(ctx)
	go flavors.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), p.trees.HasSynced, flavors.HasSynced) {
		return nil, fmt.Errorf("%s: ElasticQuotaTree and ResourceFlavor informers did not sync", Name)
	}
	executor := preemption.NewExecutor(h, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	p.evaluator = preemption.NewEvaluator(Name, h, p, executor)
	if *args.WriteStatus {
		writer := &statusWriter{cache: p.cache, trees: p.trees.GetStore(), client: dyn, interval: args.StatusUpdateInterval.Duration}
		go writer.run(klog.NewContext(ctx, logger), h.ClientSet())
	}
	return p, nil
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return Name }

// stateData is what PreFilter learned about the pod, for the later extension
// points of the same cycle.
type stateData struct {
	requests corev1.ResourceList
	verdict  elastic.Verdict
	// flavor and flavorLabels pin the pod to the flavor's nodes; flavor is empty
	// when the pod's quota node names none.
	flavor       string
	flavorLabels map[string]string
	// plan is the reclaim PostFilter computed; the preemption dry run reads it.
	plan *reclaimPlan
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
	requests := resources.PodRequests(pod)
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
	if !p.podsReady() {
		p.cache.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable, "quota usage is being rebuilt from the assigned pods")
	}
	var verdict elastic.Verdict
	if tree.Tracks(pod.UID) {
		// A pod already charged is being moved, in the autoscaler's scale-down
		// simulation: its quota does not change, only its node. (The scheduler
		// itself never sees a charged pod again: Reserve charges it on its way
		// to being bound.)
		verdict = elastic.Verdict{Leaf: leaf.Name()}
	} else {
		verdict = p.cache.admitLocked(pod, requests)
	}
	flavor := leaf.ResourceFlavor()
	flavorLabels, flavorFound := p.cache.flavors[flavor]
	p.cache.mu.Unlock()

	state.Write(stateKey, &stateData{requests: requests, verdict: verdict, flavor: flavor, flavorLabels: flavorLabels})
	if !verdict.Admitted() {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, verdict.Message())
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
	if v := p.cache.admitLocked(pod, s.requests); !v.Admitted() {
		return fwk.NewStatus(fwk.Unschedulable, v.Message())
	}
	p.cache.endHoldLocked(pod.UID)
	p.cache.tree.AddRequests(pod.UID, pod.Namespace, s.requests)
	p.cache.changed = true
	return nil
}

// Unreserve releases what Reserve charged when binding fails.
func (p *Plugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	p.cache.deletePod(pod.UID)
}

// PostFilter reclaims for a pod its quota refused: the library plans which pods
// of quota nodes above their min to evict, and the framework's preemption
// machinery picks a node, nominates the pod and evicts the victims.
func (p *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(state)
	if err != nil || s.verdict.Admitted() {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	plan, status := p.planReclaim(ctx, pod, s.requests)
	if !status.IsSuccess() {
		return nil, status
	}
	s.plan = plan
	result, status := p.evaluator.Preempt(ctx, state, pod, quotaRefusedEverywhere{m})
	if status.IsSuccess() && result != nil && result.NominatingInfo != nil && result.NominatedNodeName != "" {
		p.cache.startHold(pod, s.requests, plan.victims)
	}
	if msg := status.Message(); msg != "" {
		return result, fwk.NewStatus(status.Code(), "reclaim: "+msg)
	}
	return result, status
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
