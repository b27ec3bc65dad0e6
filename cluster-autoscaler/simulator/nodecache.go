package simulator

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// NodeInfoCache keeps each registered node's NodeInfo from one loop to the
// next. A loop reads the nodes and pods from informers, which hand out the
// same objects until they change, so most nodes and their pods are the ones
// of the last loop: their NodeInfos (the pods' requests summed, their
// affinity sorted out) are reused, and only the nodes that changed, or whose
// bound pods did, are built again. Building every node's NodeInfo anew each
// loop costs the cluster's pods, whatever changed.
//
// The NodeInfos it hands out are never changed: a snapshot copies a node
// before it places a pod there. One loop at a time uses it.
type NodeInfoCache struct {
	nodes map[string]*cachedNode
	// on is where each pod was bound at the last call, with the call's
	// stamp: a pod not seen again is forgotten.
	on    map[*corev1.Pod]placement
	stamp uint64
}

type cachedNode struct {
	node *corev1.Node
	info *framework.NodeInfo
	// count is how many pods info holds; pods are this call's, gathered in
	// a buffer kept from call to call.
	count int
	pods  []*corev1.Pod
	// changed: the node object, or one of its pods, is not the last call's.
	changed bool
	// stamp is the last call that listed the node; listed, the last that
	// put it in a snapshot.
	stamp, listed uint64
}

type placement struct {
	node  string
	stamp uint64
}

// NewNodeInfoCache returns an empty cache.
func NewNodeInfoCache() *NodeInfoCache {
	return &NodeInfoCache{nodes: map[string]*cachedNode{}, on: map[*corev1.Pod]placement{}}
}

// Snapshot is NewSnapshot with the NodeInfos of the nodes that did not change
// since the last call taken from the cache. A node is unchanged when it is
// the same object and holds exactly the same pod objects as then.
func (c *NodeInfoCache) Snapshot(nodes []*corev1.Node, pods []*corev1.Pod) *Snapshot {
	c.stamp++
	for _, n := range nodes {
		e := c.nodes[n.Name]
		if e == nil {
			e = &cachedNode{}
			c.nodes[n.Name] = e
		}
		e.changed = e.node != n || e.info == nil
		e.node, e.stamp, e.pods = n, c.stamp, e.pods[:0]
	}
	// Pods that volume and pod-group plugins look up cluster-wide, beyond
	// their node: the base snapshot below counts them.
	var special []*corev1.Pod
	specialNodes := map[string]*corev1.Node{}
	for _, p := range pods {
		e := c.nodes[p.Spec.NodeName]
		if e == nil || e.stamp != c.stamp {
			// Bound to a node not in the list (deleted, or not seen yet).
			continue
		}
		e.pods = append(e.pods, p)
		if was, ok := c.on[p]; !ok || was.node != p.Spec.NodeName {
			e.changed = true
		}
		c.on[p] = placement{node: p.Spec.NodeName, stamp: c.stamp}
		if claimsOrGroup(p) {
			special = append(special, p)
			specialNodes[p.Spec.NodeName] = e.node
		}
	}
	infos := make([]fwk.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		e := c.nodes[n.Name]
		if e.listed == c.stamp {
			continue
		}
		e.listed = c.stamp
		// Every pod held was on this node last time; as many pods means
		// the same ones.
		if e.changed || len(e.pods) != e.count {
			e.info = framework.NewNodeInfo(e.pods...)
			e.info.SetNode(e.node)
			e.count = len(e.pods)
		}
		clear(e.pods)
		infos = append(infos, e.info)
	}
	for name, e := range c.nodes {
		if e.stamp != c.stamp {
			delete(c.nodes, name)
		}
	}
	for p, at := range c.on {
		if at.stamp != c.stamp {
			delete(c.on, p)
		}
	}
	baseNodes := make([]*corev1.Node, 0, len(specialNodes))
	for _, n := range specialNodes {
		baseNodes = append(baseNodes, n)
	}
	s := newSnapshot(cache.NewSnapshot(special, baseNodes))
	s.nodes, s.owner = infos, make([]int, len(infos))
	clear(s.index)
	for i, info := range infos {
		s.index[info.Node().Name] = i
	}
	return s
}

// claimsOrGroup reports whether pod uses a PersistentVolumeClaim (directly or
// through a generic ephemeral volume) or belongs to a pod group: what the
// base snapshot counts across the cluster.
func claimsOrGroup(pod *corev1.Pod) bool {
	if pod.Spec.SchedulingGroup != nil {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}
