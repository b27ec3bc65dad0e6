package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// addUpcoming puts a template copy for every node still being provisioned into
// the snapshot: pods that fit there need no new node, and counting upcoming
// nodes is what keeps a loop during provisioning from asking again. They are
// topology domains like real nodes.
func addUpcoming(snapshot *simulator.Snapshot, state *clusterstate.State, templates map[string]*cloudprovider.NodeInfo) error {
	for _, gs := range state.Groups {
		t := templates[gs.Group.Id()]
		if t == nil {
			continue
		}
		for i := range gs.Provisioning() {
			info, slices, err := templateNodeInfo(t, gs.Group.Id(), fmt.Sprintf("upcoming-%d", i))
			if err != nil {
				return err
			}
			if err := snapshot.AddNode(info, slices...); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeOnExisting drops the pods that fit on a registered or upcoming node:
// the scheduler will place them without a new node. Placed pods stay in the
// snapshot, taking their room and counting for every later pod's affinity and
// spreading, so ten pods do not all claim one gap.
func placeOnExisting(ctx context.Context, groups []*podGroup, snapshot *simulator.Snapshot) []*podGroup {
	var remaining []*podGroup
	for _, g := range groups {
		firstTry := 0
		var left []*corev1.Pod
		for _, pod := range g.pods {
			podInfo, err := framework.NewPodInfo(pod)
			if err != nil {
				klog.FromContext(ctx).Error(err, "Skipping a pod", "pod", klog.KObj(pod))
				continue
			}
			placed := false
			if !g.check.Monotone() {
				firstTry = 0
			}
			for i := firstTry; i < snapshot.Len(); i++ {
				if g.check.Fits(ctx, snapshot.At(i)).IsSuccess() {
					node := snapshot.Place(podInfo, i)
					if err := g.check.Reserve(ctx, pod, node); err != nil {
						// The pod stays placed: Filter found its devices.
						klog.FromContext(ctx).Error(err, "Placing a pod on an existing node")
					}
					for _, other := range groups {
						other.check.Placed(ctx, podInfo, node)
					}
					placed = true
					break
				}
				firstTry = i + 1
			}
			if !placed {
				left = append(left, pod)
			}
		}
		if len(left) > 0 {
			remaining = append(remaining, &podGroup{id: g.id, pods: left, check: g.check, gang: g.gang, pastOf: g.pastOf})
		}
	}
	return remaining
}

// templateNodeInfo is a copy of a group's template, node and pods, named so
// that it collides with no real node and no other copy, and the copies of the
// template's ResourceSlices that publish its devices as its own. It keeps the
// template's labels, zone labels included, and gets a kubernetes.io/hostname of
// its own, as a new node would.
func templateNodeInfo(t *cloudprovider.NodeInfo, groupID, suffix string) (fwk.NodeInfo, []*resourcev1.ResourceSlice, error) {
	node := templateNode(t.Node, groupID, suffix)
	info, err := simulator.NewNodeInfo(node, t.Pods...)
	if err != nil {
		return nil, nil, err
	}
	return info, nodetemplate.ResourceSlicesFor(t.ResourceSlices, t.Node.Name, node.Name), nil
}

// templateNode names a copy of a group's template node, so that simulated nodes
// never collide with real ones or with each other.
func templateNode(template *corev1.Node, groupID, suffix string) *corev1.Node {
	n := template.DeepCopy()
	n.Name = fmt.Sprintf("template-%s-%s", sanitize(groupID), suffix)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[corev1.LabelHostname] = n.Name
	return n
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			out[i] = '-'
		}
	}
	return string(out)
}
