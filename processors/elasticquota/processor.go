// Package elasticquota keeps the autoscaler from buying nodes for pods their
// ElasticQuotaTree will never admit. The scheduler marks such pods Unschedulable
// like any other, and an autoscaler unaware of the tree would add nodes nobody can
// use (kubernetes/autoscaler#9828). Every pending pod is admitted against the live
// usage of the tree in force, with the same library the scheduler uses; the pods
// of one loop are charged as they are admitted, so ten pending pods in a leaf with
// room for two ask for capacity for two.
package elasticquota

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	k8sschedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/elastic"
)

// Resource is the ElasticQuotaTree resource.
var Resource = schedulingv1beta1.SchemeGroupVersion.WithResource("elasticquotatrees")

// Processor is a PodListProcessor.
type Processor struct {
	trees cache.Store
	pods  corelisters.PodLister
	// enforcing are the schedulers that run the CapacityScheduling plugin:
	// only their pods are held to the tree.
	enforcing map[string]bool
	// claimLister and classLister read pods' devices (WithClaims); nil
	// when devices are not charged.
	claimLister resourcelisters.ResourceClaimLister
	classLister resourcelisters.DeviceClassLister
	// PodGroups looks up the Workload API's PodGroups, which size gangs; nil
	// where the API is not served (ACK's gang labels need no lookup).
	PodGroups func(namespace, name string) (*k8sschedulingv1beta1.PodGroup, bool)

	mu sync.Mutex
	// tracker keeps the generation in force from one loop to the next, as
	// the scheduler's does: an invalid generation leaves the last valid one
	// in force, and the tree is built once per generation.
	tracker elastic.Tracker
}

var _ processors.PodListProcessor = &Processor{}

// New builds a processor over the tree informer's store and the pod lister,
// judging the pods of schedulers (spec.schedulerName) that enforce the tree.
func New(trees cache.Store, pods corelisters.PodLister, schedulers []string) *Processor {
	enforcing := map[string]bool{}
	for _, s := range schedulers {
		enforcing[s] = true
	}
	return &Processor{trees: trees, pods: pods, enforcing: enforcing}
}

// Process keeps the pods their quota admits and refuses the rest, with CA-style
// reasons and the numbers behind them.
func (p *Processor) Process(ctx context.Context, _ *processors.LoopContext, pending []*corev1.Pod) ([]*corev1.Pod, []processors.RefusedPod, error) {
	live, nominated, all, err := p.liveTree(ctx)
	if err != nil || live == nil {
		return pending, nil, err
	}
	scratch := live.tree.Scratch()
	// The pods a reclaim is making room for take their quota first: they are
	// placed as soon as the victims are gone.
	for _, pod := range nominated {
		live.admit(scratch, pod)
	}
	// A pod of another scheduler is placed whatever the tree says: refusing it
	// a node the stock scheduler would use helps nobody.
	var kept, ordered []*corev1.Pod
	for _, pod := range pending {
		if p.enforcing[pod.Spec.SchedulerName] {
			ordered = append(ordered, pod)
		} else {
			kept = append(kept, pod)
		}
	}
	sort.SliceStable(ordered, func(i, j int) bool { return admissionOrder(ordered[i], ordered[j]) })
	gangs := newGangAdmission(p.PodGroups, all, ordered)
	var refused []processors.RefusedPod
	for _, pod := range ordered {
		if d, ok := gangs.admit(scratch, live, pod); ok {
			if d.refusal == nil {
				kept = append(kept, pod)
			} else {
				refused = append(refused, processors.RefusedPod{Pod: pod, Reason: *d.refusal, Gang: &d.gang})
			}
			continue
		}
		verdict := live.admit(scratch, pod)
		if verdict.Admitted() {
			kept = append(kept, pod)
			continue
		}
		refused = append(refused, processors.RefusedPod{Pod: pod, Reason: processors.Reason{
			MessageID:  processors.MessagePodRefused,
			Parameters: []string{verdict.Reason(), verdict.Message()},
			Message:    verdict.Reason(),
		}})
	}
	if len(refused) > 0 {
		klog.FromContext(ctx).V(2).Info("Pods their ElasticQuotaTree will not admit trigger no scale-up", "refused", len(refused), "kept", len(kept))
	}
	return kept, refused, nil
}

// admissionOrder admits as the scheduler's queue would: higher priority first,
// then older, then by name for determinism.
func admissionOrder(a, b *corev1.Pod) bool {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// liveTree is the tree in force, chosen as the scheduler chooses it, charged
// with the pods bound right now (and their devices, with WithClaims); and the
// pending pods a reclaim nominated, from the same pass over the pods; and all
// the pods.
func (p *Processor) liveTree(ctx context.Context) (*pass, []*corev1.Pod, []*corev1.Pod, error) {
	inForce := p.inForce(ctx)
	if inForce.Tree == nil {
		return nil, nil, nil, nil
	}
	live, err := p.newPass(inForce.Tree.Uncharged())
	if err != nil {
		return nil, nil, nil, err
	}
	pods, err := p.pods.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	var nominated []*corev1.Pod
	for _, pod := range pods {
		switch {
		case elastic.Charged(pod):
			live.chargeBound(pod)
		case pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "" && pod.DeletionTimestamp == nil:
			nominated = append(nominated, pod)
		}
	}
	return live, nominated, pods, nil
}

// TreeInForce is the generation in force with its tree charged with the pods
// bound right now: what Process admits against, before the pods a reclaim
// nominated. Tree is nil when no tree is in force.
func (p *Processor) TreeInForce(ctx context.Context) (elastic.TreeInForce, error) {
	inForce := p.inForce(ctx)
	live, _, _, err := p.liveTree(ctx)
	inForce.Tree = nil
	if live != nil {
		inForce.Tree = live.tree
	}
	return inForce, err
}

// inForce observes the tree objects the informer holds.
func (p *Processor) inForce(ctx context.Context) elastic.TreeInForce {
	var trees []*schedulingv1beta1.ElasticQuotaTree
	for _, obj := range p.trees.List() {
		if t, ok := obj.(*schedulingv1beta1.ElasticQuotaTree); ok {
			trees = append(trees, t)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	obs := p.tracker.Observe(trees)
	for _, v := range obs.Trees {
		if v.NewlyInvalid && v.Object == obs.Chosen {
			klog.FromContext(ctx).Info("ElasticQuotaTree generation is invalid", "tree", klog.KObj(v.Object), "generation", v.Object.Generation,
				"enforcedGeneration", obs.InForce.Generation, "err", v.Err)
		}
	}
	return obs.InForce
}

// RootMin is the min of the root of the tree in force, which scale-down keeps
// allocatable for; nil without a tree.
func (p *Processor) RootMin() corev1.ResourceList {
	inForce := p.inForce(context.Background())
	if inForce.Tree == nil {
		return nil
	}
	return inForce.Spec.Root.Min.DeepCopy()
}
