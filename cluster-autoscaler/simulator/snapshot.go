package simulator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Snapshot is the cluster as one loop sees it: registered nodes with their pods,
// plus one template node per node group that may grow.
type Snapshot struct {
	inner *cache.Snapshot
}

func newEmptySnapshot() *cache.Snapshot { return cache.NewEmptySnapshot() }

// NewSnapshot builds a snapshot of nodes and the pods bound to them. Pods bound to
// a node that is not in the list (deleted, or not seen yet) are left out: a node
// entry without a node object would trip every Filter plugin.
func NewSnapshot(nodes []*corev1.Node, pods []*corev1.Pod) *Snapshot {
	known := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		known[n.Name] = true
	}
	onKnownNodes := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if known[p.Spec.NodeName] {
			onKnownNodes = append(onKnownNodes, p)
		}
	}
	return &Snapshot{inner: cache.NewSnapshot(onKnownNodes, nodes)}
}

// NodeInfo returns a node's info from the snapshot.
func (s *Snapshot) NodeInfo(name string) (fwk.NodeInfo, error) {
	return s.inner.NodeInfos().Get(name)
}

// NodeInfos lists every node of the snapshot.
func (s *Snapshot) NodeInfos() ([]fwk.NodeInfo, error) {
	return s.inner.NodeInfos().List()
}

// NewNodeInfo builds a standalone NodeInfo, outside any snapshot: a template node
// with the pods every new node of its group runs.
func NewNodeInfo(node *corev1.Node, pods ...*corev1.Pod) (fwk.NodeInfo, error) {
	if node == nil {
		return nil, fmt.Errorf("template without a node")
	}
	info := framework.NewNodeInfo(pods...)
	info.SetNode(node)
	return info, nil
}
