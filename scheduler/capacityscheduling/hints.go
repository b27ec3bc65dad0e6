package capacityscheduling

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/quota/resources"
)

// EventsToRegister lists what can unblock a pod this plugin refused, with hints
// that requeue only the pods an event can help.
func (p *Plugin) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	// DefaultPreemption's own, which let a preemptor its PreEnqueue held back
	// in again.
	upstream, err := p.defaultPreemption.EventsToRegister(ctx)
	if err != nil {
		return nil, err
	}
	return append(upstream, []fwk.ClusterEventWithHint{
		// A charged pod leaving, or shrinking, frees quota on its path.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.isSchedulableAfterPodRelease},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.UpdatePodScaleDown}, QueueingHintFn: p.isSchedulableAfterPodRelease},
		// A nominated pod giving up its place stops holding quota back.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}, QueueingHintFn: p.isSchedulableAfterPodRelease},
		// A gang's pod created completes the gang its siblings wait for.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add}, QueueingHintFn: p.isSchedulableAfterGangPodAdded},
		// A node joining or relabelled may carry a flavor's labels.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: p.isSchedulableAfterNodeChange},
		// A claim or DeviceClass appearing lets quota read a pod's devices
		// (the pod is refused while it cannot).
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}},
		// A new tree or flavor changes every decision.
		{Event: fwk.ClusterEvent{Resource: fwk.EventResource(treesResource.Resource + "." + treesResource.Version + "." + treesResource.Group), ActionType: fwk.All}},
		{Event: fwk.ClusterEvent{Resource: fwk.EventResource(flavorsResource.Resource + "." + flavorsResource.Version + "." + flavorsResource.Group), ActionType: fwk.All}},
	}...), nil
}

// isSchedulableAfterPodRelease requeues the pending pod when the released pod's
// quota path crosses a quota node the pending pod exceeds, on a resource the
// released pod held. Whether the handler already released it does not matter:
// the check is structural.
func (p *Plugin) isSchedulableAfterPodRelease(logger klog.Logger, pending *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	released := podOf(oldObj)
	if released == nil {
		return fwk.Queue, nil
	}
	// Its devices too: its own, and the shared claims it may have been the
	// last to use.
	freed := p.cache.freedBy(released)
	if newPod := podOf(newObj); newPod != nil {
		// A scale-down frees the difference only.
		after := resources.PodRequests(newPod)
		for name, q := range after {
			if old, ok := freed[name]; ok {
				old.Sub(q)
				freed[name] = old
			}
		}
	}
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	tree := p.cache.tree
	if tree == nil {
		return fwk.QueueSkip, nil
	}
	leaf, governed := tree.LeafFor(released.Namespace)
	if !governed {
		return fwk.QueueSkip, nil
	}
	verdict := tree.AdmitRequest(pending.Namespace, p.cache.requestLocked(pending))
	if !verdict.Governed() || verdict.Admitted() {
		return fwk.Queue, nil
	}
	onPath := map[string]bool{}
	for n, ok := leaf, true; ok; n, ok = n.Parent() {
		onPath[n.Name()] = true
	}
	for _, e := range verdict.Excesses {
		if !onPath[e.Node] {
			continue
		}
		for _, r := range e.Resources {
			if q, ok := freed[r.Resource]; ok && q.Sign() > 0 {
				logger.V(5).Info("Requeueing a pod: a pod on its blocking quota node was released",
					"pod", klog.KObj(pending), "released", klog.KObj(released), "quotaNode", e.Node, "resource", r.Resource)
				return fwk.Queue, nil
			}
		}
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterNodeChange requeues a pod refused by its ResourceFlavor when
// the node now carries the flavor's labels; quota refusals do not depend on nodes.
func (p *Plugin) isSchedulableAfterNodeChange(_ klog.Logger, pending *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	node, ok := newObj.(*corev1.Node)
	if !ok {
		return fwk.Queue, nil
	}
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	if p.cache.tree == nil {
		return fwk.QueueSkip, nil
	}
	leaf, governed := p.cache.tree.LeafFor(pending.Namespace)
	if !governed || leaf.ResourceFlavor() == "" {
		return fwk.QueueSkip, nil
	}
	labels, found := p.cache.flavors[leaf.ResourceFlavor()]
	if !found {
		return fwk.QueueSkip, nil
	}
	for k, v := range labels {
		if node.Labels[k] != v {
			return fwk.QueueSkip, nil
		}
	}
	return fwk.Queue, nil
}
