package scaledown

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/processors"
)

type candidate struct {
	node        *corev1.Node
	group       cloudprovider.NodeGroup
	utilization float64
	pods        []*corev1.Pod // to move
	index       int           // in the destination list
	unready     bool
}

// eligible are the nodes whose removal Plan considers, least utilized first:
// managed by a node group not in its own delay and not being deleted, not
// annotated scale-down-disabled, not found unremovable lately, ready or
// allowed to be removed unready, at or below the utilization threshold, and
// with no pod that keeps its node. The nodes no group manages and those being
// deleted are no destination either; the others kept are recorded in plan.
func (p *Planner) eligible(in Input, infos []fwk.NodeInfo, dest *destinations, plan *Plan) []*candidate {
	podsByNode := map[string][]*corev1.Pod{}
	for _, pod := range in.Pods {
		podsByNode[pod.Spec.NodeName] = append(podsByNode[pod.Spec.NodeName], pod)
	}
	var candidates []*candidate
	for i, info := range infos {
		node := info.Node()
		group := in.GroupOf(node)
		if group == nil || nodetemplate.BeingDeleted(node) {
			dest.exclude(i)
			continue
		}
		if in.GroupInDelay != nil && in.GroupInDelay(group.Id()) {
			continue
		}
		kept := func(reason string, params ...string) {
			plan.Kept = append(plan.Kept, processors.KeptNode{Node: node, GroupID: group.Id(), Reason: keptReason(reason, params...)})
		}
		if node.Annotations[ScaleDownDisabledAnnotation] == "true" {
			kept(reasonScaleDownOff)
			continue
		}
		if at, ok := p.recheckAt[node.Name]; ok && in.Now.Before(at) {
			kept(reasonRecentlyUnremovable)
			continue
		}
		ready := isReady(node)
		if !ready && !p.opts.UnreadyEnabled {
			kept(reasonUnreadyOff)
			continue
		}
		u, threshold := utilization(node, podsByNode[node.Name], p.opts)
		// At or below the threshold is underutilized, as upstream's.
		if u > threshold {
			continue
		}
		c := &candidate{node: node, group: group, utilization: u, index: i, unready: !ready}
		if p.podsMove(in, c, podsByNode[node.Name], kept) {
			candidates = append(candidates, c)
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].utilization != candidates[j].utilization {
			return candidates[i].utilization < candidates[j].utilization
		}
		return candidates[i].node.Name < candidates[j].node.Name
	})
	return candidates
}

// podsMove collects in c the pods that would have to move, and reports
// false, keeping the node, at the first pod that keeps its node.
func (p *Planner) podsMove(in Input, c *candidate, pods []*corev1.Pod, kept func(reason string, params ...string)) bool {
	for _, pod := range pods {
		switch kind, reason := classify(pod, in.PDBs, in.Controllers, p.opts, in.Now); kind {
		case podBlocks:
			kept(reason, pod.Namespace+"/"+pod.Name)
			p.recheckLater(c.node.Name, in.Now)
			return false
		case podMoves:
			c.pods = append(c.pods, pod)
		}
	}
	return true
}

// isReady is the node's Ready condition. A node that is not ready is removed
// after --scale-down-unready-time, or never with
// --scale-down-unready-enabled=false.
func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
