package elastic

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/quota/resources"
)

// shape is the immutable part of a tree. Usage copies (Scratch) share it, so
// copying a tree for a what-if costs one int64 slice, not a rebuild.
type shape struct {
	object string // namespace/name of the ElasticQuotaTree, for messages
	index  *resources.Index
	nodes  []node // depth-first preorder; nodes[0] is the root
	byName map[string]int
	leafOf map[string]int // namespace -> leaf position in nodes
}

type node struct {
	name       string
	path       string // names from the root, joined by "/"
	parent     int    // -1 for the root
	depth      int    // the root is 1
	children   []int
	namespaces []string // sorted
	flavor     string   // own resourceflavors attribute, else the nearest ancestor's
	min, max   resources.Vector
	minNamed   []bool // the spec wrote this resource in min (possibly as 0)
	named      []bool // the spec wrote this resource in min or max
}

// Node is a read-only view of one quota node.
type Node struct {
	shape *shape
	pos   int
}

func (s *shape) view(pos int) Node { return Node{shape: s, pos: pos} }

func (n Node) data() *node { return &n.shape.nodes[n.pos] }

// Name is the node's name, unique in its tree.
func (n Node) Name() string { return n.data().name }

// Path is the chain of names from the root, e.g. "root/root.a/root.a.1".
func (n Node) Path() string { return n.data().path }

// Depth counts from 1 at the root.
func (n Node) Depth() int { return n.data().depth }

// Parent is the enclosing node; the root has none.
func (n Node) Parent() (Node, bool) {
	p := n.data().parent
	if p < 0 {
		return Node{}, false
	}
	return n.shape.view(p), true
}

// Children are the sub-quotas in spec order.
func (n Node) Children() []Node {
	children := make([]Node, 0, len(n.data().children))
	for _, c := range n.data().children {
		children = append(children, n.shape.view(c))
	}
	return children
}

// IsLeaf reports whether the node has no children, i.e. may carry namespaces.
func (n Node) IsLeaf() bool { return len(n.data().children) == 0 }

// Namespaces are the namespaces charged to this leaf, sorted.
func (n Node) Namespaces() []string { return append([]string(nil), n.data().namespaces...) }

// ResourceFlavor is the ResourceFlavor whose node labels pods of this node
// must land on: the node's own attribute, else the nearest ancestor's, else "".
func (n Node) ResourceFlavor() string { return n.data().flavor }

// Min is the guarantee, as canonical quantities over the tree's resources.
func (n Node) Min() corev1.ResourceList {
	named := n.data().minNamed
	return n.shape.index.ListWhere(n.data().min, func(pos int, _ int64) bool { return named[pos] })
}

// Max is the ceiling; unlimited resources are left out.
func (n Node) Max() corev1.ResourceList { return n.shape.index.List(n.data().max) }
