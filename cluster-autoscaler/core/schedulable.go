package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

// placeOnExisting drops the pods that fit on a registered node or on a node
// still being provisioned: the scheduler will place them without a new node, and
// counting upcoming nodes is what keeps a loop during provisioning from asking
// again. Placed pods take their room, so ten pods do not all claim one gap.
func placeOnExisting(ctx context.Context, groups []*podGroup, snapshot *simulator.Snapshot, state *clusterstate.State,
	templates map[string]*cloudprovider.NodeInfo) ([]*podGroup, error) {
	existing, err := snapshot.NodeInfos()
	if err != nil {
		return nil, fmt.Errorf("listing snapshot nodes: %w", err)
	}
	nodes := newCopyOnWrite(existing)
	for _, gs := range state.Groups {
		t := templates[gs.Group.Id()]
		if t == nil {
			continue
		}
		for i := range gs.Provisioning() {
			info, err := simulator.NewNodeInfo(templateNode(t.Node, gs.Group.Id(), fmt.Sprintf("upcoming-%d", i)), t.Pods...)
			if err != nil {
				return nil, err
			}
			nodes.append(info)
		}
	}
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
			for i := firstTry; i < nodes.len(); i++ {
				if g.check.Fits(ctx, nodes.get(i)).IsSuccess() {
					nodes.writable(i).AddPodInfo(podInfo)
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
			remaining = append(remaining, &podGroup{id: g.id, pods: left, check: g.check})
		}
	}
	return remaining, nil
}

// copyOnWrite clones a snapshot node only when a simulated pod lands on it, so
// the common case (most nodes untouched) copies nothing.
type copyOnWrite struct {
	infos  []fwk.NodeInfo
	cloned []bool
}

func newCopyOnWrite(infos []fwk.NodeInfo) *copyOnWrite {
	return &copyOnWrite{infos: append([]fwk.NodeInfo(nil), infos...), cloned: make([]bool, len(infos))}
}

func (c *copyOnWrite) len() int               { return len(c.infos) }
func (c *copyOnWrite) get(i int) fwk.NodeInfo { return c.infos[i] }
func (c *copyOnWrite) append(info fwk.NodeInfo) {
	c.infos = append(c.infos, info)
	c.cloned = append(c.cloned, true)
}
func (c *copyOnWrite) writable(i int) fwk.NodeInfo {
	if !c.cloned[i] {
		c.infos[i] = c.infos[i].Snapshot()
		c.cloned[i] = true
	}
	return c.infos[i]
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
