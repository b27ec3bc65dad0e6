package simulator

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Snapshot is the cluster as one loop simulates it: the registered nodes with
// their pods, then the nodes the simulation adds (upcoming and new nodes of a
// group) and the pods it places. Plugins read it through the framework's
// lister, so that PreFilter sees simulated nodes and pods like real ones: a new
// node is a topology domain, a placed pod counts for affinity and spreading.
//
// A node is copied only when a simulated pod lands on it, and Fork/Revert undo
// the changes of one estimate, so that estimating for many groups costs no copy
// of the whole cluster.
type Snapshot struct {
	base  *cache.Snapshot
	nodes []fwk.NodeInfo
	index map[string]int
	// owner[i] is the generation that copied (or added) nodes[i]; the node is
	// the current generation's to change when owner[i] == gen. Each Fork
	// starts a new generation, so its changes copy the node again.
	owner        []int
	gen, lastGen int
	// undo are the nodes that Place replaced since the oldest open fork:
	// Revert puts them back, so a fork costs what it changes, not a copy of
	// every node.
	undo   []replaced
	forks  []fork
	listed *affinityLists
	// dra is what the simulation adds to the cluster's DRA objects: the
	// added nodes' devices and the claims allocated to placed pods.
	dra draState
}

type replaced struct {
	i     int
	node  fwk.NodeInfo
	owner int
}

// fork is where the snapshot stood at a Fork: its length, undo log,
// generation and DRA state.
type fork struct {
	len, undo, gen int
	dra            draMark
}

// affinityLists are the lister's subsets of nodes, rebuilt after a change when
// a plugin asks for them (PreFilter does, Filter does not).
type affinityLists struct {
	withAffinity, withRequiredAntiAffinity, withRequiredNonHostScoped []fwk.NodeInfo
}

func newEmptySnapshot() *Snapshot { return newSnapshot(cache.NewEmptySnapshot()) }

func newSnapshot(base *cache.Snapshot) *Snapshot {
	list, _ := base.List()
	// Generation 0 owns nothing: the base's nodes are copied before a change.
	s := &Snapshot{base: base, nodes: append([]fwk.NodeInfo(nil), list...), index: make(map[string]int, len(list)),
		owner: make([]int, len(list)), gen: 1, lastGen: 1, dra: draState{stamp: newStamp()}}
	for i, n := range list {
		s.index[n.Node().Name] = i
	}
	return s
}

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
	return newSnapshot(cache.NewSnapshot(onKnownNodes, nodes))
}

// NodeInfo returns a node's info from the snapshot.
func (s *Snapshot) NodeInfo(name string) (fwk.NodeInfo, error) { return s.Get(name) }

// NodeInfos lists every node of the snapshot, real ones first, then the
// simulated ones in the order they were added. It is the snapshot's own list,
// which its name index points into: callers must not reorder it (sort a copy).
func (s *Snapshot) NodeInfos() ([]fwk.NodeInfo, error) { return s.nodes, nil }

// Len and At walk the nodes by position, which stays stable while pods are
// placed.
func (s *Snapshot) Len() int              { return len(s.nodes) }
func (s *Snapshot) At(i int) fwk.NodeInfo { return s.nodes[i] }

// AddNode adds a simulated node, with the pods info already holds and the
// ResourceSlices its DRA drivers would publish, which must be local to it.
func (s *Snapshot) AddNode(info fwk.NodeInfo, slices ...*resourcev1.ResourceSlice) error {
	if info.Node() == nil {
		return errors.New("adding a node info without a node")
	}
	name := info.Node().Name
	if _, ok := s.index[name]; ok {
		return fmt.Errorf("node %s is already in the snapshot", name)
	}
	s.index[name] = len(s.nodes)
	s.nodes = append(s.nodes, info)
	s.owner = append(s.owner, s.gen)
	s.listed = nil
	s.addSlices(slices)
	return nil
}

// Place adds a simulated pod to the node at position i and returns the node as
// it now is.
func (s *Snapshot) Place(pod fwk.PodInfo, i int) fwk.NodeInfo {
	if s.owner[i] != s.gen {
		if len(s.forks) > 0 {
			s.undo = append(s.undo, replaced{i: i, node: s.nodes[i], owner: s.owner[i]})
		}
		s.nodes[i] = s.nodes[i].Snapshot()
		s.owner[i] = s.gen
	}
	s.nodes[i].AddPodInfo(pod)
	s.listed = nil
	return s.nodes[i]
}

// Fork starts changes that Revert undoes.
func (s *Snapshot) Fork() {
	s.forks = append(s.forks, fork{len: len(s.nodes), undo: len(s.undo), gen: s.gen, dra: s.draMark()})
	s.lastGen++
	s.gen = s.lastGen
}

// Revert undoes every change since the matching Fork.
func (s *Snapshot) Revert() {
	f := s.forks[len(s.forks)-1]
	s.forks = s.forks[:len(s.forks)-1]
	for j := len(s.undo) - 1; j >= f.undo; j-- {
		u := s.undo[j]
		s.nodes[u.i], s.owner[u.i] = u.node, u.owner
	}
	clear(s.undo[f.undo:])
	s.undo = s.undo[:f.undo]
	for _, n := range s.nodes[f.len:] {
		delete(s.index, n.Node().Name)
	}
	clear(s.nodes[f.len:])
	s.nodes, s.owner, s.gen, s.listed = s.nodes[:f.len], s.owner[:f.len], f.gen, nil
	s.revertDRA(f.dra)
}

// Commit keeps every change since the matching Fork: they become changes of
// the fork before it, which a Revert of that one undoes, since their undo log
// stays. The generation stays too, so the nodes the committed fork copied are
// not copied again.
func (s *Snapshot) Commit() {
	s.forks = s.forks[:len(s.forks)-1]
	if len(s.forks) == 0 {
		clear(s.undo)
		s.undo = s.undo[:0]
		clear(s.dra.undo)
		s.dra.undo = s.dra.undo[:0]
	}
}

// The scheduler framework's listers.

func (s *Snapshot) List() ([]fwk.NodeInfo, error) { return s.nodes, nil }

func (s *Snapshot) Get(name string) (fwk.NodeInfo, error) {
	if i, ok := s.index[name]; ok {
		return s.nodes[i], nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

func (s *Snapshot) lists() *affinityLists {
	if s.listed == nil {
		l := &affinityLists{}
		for _, n := range s.nodes {
			if len(n.GetPodsWithAffinity()) > 0 {
				l.withAffinity = append(l.withAffinity, n)
			}
			if len(n.GetPodsWithRequiredAntiAffinity()) > 0 {
				l.withRequiredAntiAffinity = append(l.withRequiredAntiAffinity, n)
			}
			if len(n.GetPodsWithRequiredNonHostScopedAntiAffinity()) > 0 {
				l.withRequiredNonHostScoped = append(l.withRequiredNonHostScoped, n)
			}
		}
		s.listed = l
	}
	return s.listed
}

func (s *Snapshot) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return s.lists().withAffinity, nil
}

func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.lists().withRequiredAntiAffinity, nil
}

func (s *Snapshot) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.lists().withRequiredNonHostScoped, nil
}

// lister is what the framework's plugins read: the snapshot's nodes, and the
// real cluster's volumes and pod groups (simulated pods claim no volume and
// join no pod group).
type lister struct{ *Snapshot }

func (l lister) NodeInfos() fwk.NodeInfoLister           { return l.Snapshot }
func (l lister) StorageInfos() fwk.StorageInfoLister     { return l.base.StorageInfos() }
func (l lister) PodGroupStates() fwk.PodGroupStateLister { return l.base.PodGroupStates() }
func (l lister) PodGroups() fwk.PodGroupLister           { return l.base.PodGroups() }
func (l lister) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return l.base.CompositePodGroupStates()
}
func (l lister) CompositePodGroups() fwk.CompositePodGroupLister { return l.base.CompositePodGroups() }

// The mutation session is for PodGroupPostFilter plugins, which the
// simulation does not run; it maps onto Fork and Revert.
func (l lister) StartMutations() error { l.Fork(); return nil }
func (l lister) EndMutations() error {
	if len(l.forks) == 0 {
		return errors.New("no mutation session started")
	}
	l.Revert()
	return nil
}
func (l lister) AddPod(pod fwk.PodInfo, nodeName string) error {
	i, ok := l.index[nodeName]
	if !ok {
		return fmt.Errorf("node %q not found in the snapshot", nodeName)
	}
	l.Place(pod, i)
	return nil
}
func (l lister) RemovePod(klog.Logger, *corev1.Pod, string) error {
	return errors.New("the autoscaler's simulation removes no pod")
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
