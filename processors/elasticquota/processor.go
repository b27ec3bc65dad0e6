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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
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

	mu sync.Mutex
	// enforced is the generation of the tree object seen.uid in force, with
	// its spec; elastic.LastValid keeps it in force while a newer generation
	// is invalid, as in the scheduler. Nil when no generation is valid.
	enforced *schedulingv1beta1.ElasticQuotaTree
	// seen is what was last judged, so an unchanged tree is not judged again
	// and an invalid generation is logged once.
	seen seenTree
}

type seenTree struct {
	uid                  types.UID
	generation, recorded int64
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
	tree, nominated, err := p.liveTree(ctx)
	if err != nil || tree == nil {
		return pending, nil, err
	}
	scratch := tree.Scratch()
	// The pods a reclaim is making room for take their quota first: they are
	// placed as soon as the victims are gone.
	for _, pod := range nominated {
		scratch.Add(pod.Namespace, resources.PodRequests(pod))
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
	var refused []processors.RefusedPod
	for _, pod := range ordered {
		verdict := scratch.Add(pod.Namespace, resources.PodRequests(pod))
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
// with the pods bound right now; and the pending pods a reclaim nominated, from
// the same pass over the pods.
func (p *Processor) liveTree(ctx context.Context) (*elastic.Tree, []*corev1.Pod, error) {
	spec := p.treeInForce(ctx)
	if spec == nil {
		return nil, nil, nil
	}
	tree, err := elastic.Build(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("building ElasticQuotaTree %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	pods, err := p.pods.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	var nominated []*corev1.Pod
	for _, pod := range pods {
		switch {
		case pod.Spec.NodeName != "":
			tree.AddPod(pod)
		case pod.Status.NominatedNodeName != "" && pod.DeletionTimestamp == nil:
			nominated = append(nominated, pod)
		}
	}
	return tree, nominated, nil
}

func (p *Processor) treeInForce(ctx context.Context) *schedulingv1beta1.ElasticQuotaTree {
	var trees []*schedulingv1beta1.ElasticQuotaTree
	for _, obj := range p.trees.List() {
		if t, ok := obj.(*schedulingv1beta1.ElasticQuotaTree); ok {
			trees = append(trees, t)
		}
	}
	chosen := elastic.InForce(trees)
	p.mu.Lock()
	defer p.mu.Unlock()
	if chosen == nil {
		p.enforced, p.seen = nil, seenTree{}
		return nil
	}
	seen := seenTree{uid: chosen.UID, generation: chosen.Generation}
	if chosen.Status.LastValid != nil {
		seen.recorded = chosen.Status.LastValid.Generation
	}
	if seen == p.seen {
		return p.enforced
	}
	var remembered *schedulingv1beta1.TreeGeneration
	if p.enforced != nil && p.seen.uid == chosen.UID {
		remembered = &schedulingv1beta1.TreeGeneration{Generation: p.enforced.Generation, Spec: p.enforced.Spec}
	}
	p.seen = seen
	enforced, err := elastic.LastValid(chosen, remembered)
	if err != nil {
		klog.FromContext(ctx).Info("ElasticQuotaTree generation is invalid", "tree", klog.KObj(chosen), "generation", chosen.Generation,
			"enforcedGeneration", enforced.Generation, "err", err)
	}
	p.enforced = nil
	if enforced.Tree != nil {
		p.enforced = &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: chosen.ObjectMeta, Spec: *enforced.Spec}
		p.enforced.Generation = enforced.Generation
	}
	return p.enforced
}

// RootMin is the min of the root of the tree in force, which scale-down keeps
// allocatable for; nil without a tree.
func (p *Processor) RootMin() corev1.ResourceList {
	spec := p.treeInForce(context.Background())
	if spec == nil {
		return nil
	}
	return spec.Spec.Root.Min.DeepCopy()
}
