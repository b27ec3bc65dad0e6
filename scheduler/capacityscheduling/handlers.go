package capacityscheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// registerHandlers wires the informers to the cache. Pod handlers sit on the
// scheduler's own pod informer, so usage follows exactly the pods the scheduler
// sees; PreFilter waits until they have been delivered once after a start. It
// returns the HasSynced of the tree and flavor handlers' registrations.
func (p *Plugin) registerHandlers(logger klog.Logger, pods, flavors cache.SharedIndexInformer) ([]cache.InformerSynced, error) {
	reg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.onPod(nil, obj) },
		UpdateFunc: func(old, obj any) { p.onPod(old, obj) },
		DeleteFunc: func(obj any) {
			if pod := podOf(obj); pod != nil {
				p.cache.deletePod(pod)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: pod handler: %w", Name, err)
	}
	p.podsReady = reg.HasSynced

	syncTrees := func(any) { p.syncTrees(logger) }
	treesReg, err := p.trees.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    syncTrees,
		UpdateFunc: func(_, obj any) { syncTrees(obj) },
		DeleteFunc: syncTrees,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: tree handler: %w", Name, err)
	}

	onFlavor := func(obj any) {
		if f, ok := obj.(*kueuev1beta1.ResourceFlavor); ok {
			p.cache.updateFlavor(f)
		}
	}
	flavorsReg, err := flavors.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onFlavor,
		UpdateFunc: func(_, obj any) { onFlavor(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if f, ok := obj.(*kueuev1beta1.ResourceFlavor); ok {
				p.cache.deleteFlavor(f.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: flavor handler: %w", Name, err)
	}
	return []cache.InformerSynced{treesReg.HasSynced, flavorsReg.HasSynced}, nil
}

// onPod handles an added pod (old is nil) or an updated one.
func (p *Plugin) onPod(old, obj any) {
	if pod := podOf(obj); pod != nil {
		before, _ := old.(*corev1.Pod)
		p.cache.updatePod(before, pod)
		p.warnBadGang(pod)
	}
}

// syncTrees re-decides the tree in force from every tree object the informer
// holds, then records the resulting events outside the lock.
func (p *Plugin) syncTrees(logger klog.Logger) {
	var trees []*schedulingv1beta1.ElasticQuotaTree
	for _, obj := range p.trees.GetStore().List() {
		if t, ok := obj.(*schedulingv1beta1.ElasticQuotaTree); ok {
			trees = append(trees, t)
		}
	}
	p.cache.mu.Lock()
	events := p.cache.syncTreesLocked(logger, trees)
	p.cache.mu.Unlock()
	recorder := p.handle.EventRecorder()
	if !*p.args.WriteStatus || recorder == nil {
		return
	}
	for _, e := range events {
		ref := &corev1.ObjectReference{
			APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "ElasticQuotaTree",
			Namespace: e.tree.Namespace, Name: e.tree.Name, UID: e.tree.UID, ResourceVersion: e.tree.ResourceVersion,
		}
		recorder.Eventf(ref, nil, e.eventType, e.reason, "Validate", "%s", e.note)
	}
}

func podOf(obj any) *corev1.Pod {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}
