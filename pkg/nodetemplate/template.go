package nodetemplate

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// GoodExample says whether a node shows what a new node of its group looks
// like: it is Ready, schedulable, and neither deleted nor being removed by the
// autoscaler. A node that is not is broken or on its way out, and may miss
// labels, resources or DaemonSet pods a working node has.
func GoodExample(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil || n.Spec.Unschedulable || BeingDeleted(n) {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Example chooses the node of a group that its template is made from, the
// same one whoever asks: the first good example (GoodExample) by name. When
// the group has none, it returns the first of its other nodes by name with
// good false: upstream uses such a node only as a last resort, when the cloud
// provider cannot describe the group's nodes either. Nil for no nodes.
func Example(nodes []*corev1.Node) (example *corev1.Node, good bool) {
	for _, n := range nodes {
		if n == nil {
			continue
		}
		isGood := GoodExample(n)
		switch {
		case example == nil, isGood && !good, isGood == good && strings.Compare(n.Name, example.Name) < 0:
			example, good = n, isGood
		}
	}
	return example, good
}

// FromNode is a template node called name made from a node of the group: a
// copy without what belongs to that one node, its UID and its transient
// taints (SanitizeTaints), and with a kubernetes.io/hostname label of its own,
// as upstream sanitizes a node into a template. The node itself is not
// modified.
func FromNode(node *corev1.Node, name string, tc TaintConfig) *corev1.Node {
	t := node.DeepCopy()
	t.Name = name
	t.UID = ""
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[corev1.LabelHostname] = name
	t.Spec.Taints = SanitizeTaints(t.Spec.Taints, tc)
	return t
}
