package nodetemplate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func taint(key string) corev1.Taint {
	return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
}

// TestSanitizeTaints: the autoscaler's taints, upstream's node-condition
// taints and startup and status taints (by prefix, and by flag when
// configured) go; anything else stays, in order.
func TestSanitizeTaints(t *testing.T) {
	all := []corev1.Taint{
		taint("dedicated"),
		taint("ToBeDeletedByClusterAutoscaler"), taint("DeletionCandidateOfClusterAutoscaler"),
		taint("node.kubernetes.io/not-ready"), taint("node.kubernetes.io/unreachable"),
		taint("node.kubernetes.io/unschedulable"), taint("node.kubernetes.io/memory-pressure"),
		taint("node.kubernetes.io/disk-pressure"), taint("node.kubernetes.io/network-unavailable"),
		taint("node.kubernetes.io/pid-pressure"), taint("node.cloudprovider.kubernetes.io/uninitialized"),
		taint("node.cloudprovider.kubernetes.io/shutdown"), taint("cloud.google.com/impending-node-termination"),
		taint("NodeWithImpairedVolumes"),
		taint("ignore-taint.cluster-autoscaler.kubernetes.io/a"), taint("startup-taint.cluster-autoscaler.kubernetes.io/b"),
		taint("status-taint.cluster-autoscaler.kubernetes.io/c"),
		taint("cilium.io/agent-not-ready"), taint("example.com/booting-1"), taint("gpu-health"),
		// Not on upstream's list: a node keeps it until someone removes it.
		taint("node.kubernetes.io/out-of-service"),
		taint("node.cluster.x-k8s.io/uninitialized"),
	}
	keep := []corev1.Taint{taint("dedicated"), taint("cilium.io/agent-not-ready"), taint("example.com/booting-1"),
		taint("gpu-health"), taint("node.kubernetes.io/out-of-service"), taint("node.cluster.x-k8s.io/uninitialized")}
	if diff := cmp.Diff(keep, SanitizeTaints(all, TaintConfig{})); diff != "" {
		t.Errorf("zero config (-want +got):\n%s", diff)
	}
	tc := NewTaintConfig([]string{"cilium.io/agent-not-ready"}, []string{"example.com/booting-"}, []string{"gpu-health"})
	keep = []corev1.Taint{taint("dedicated"), taint("node.kubernetes.io/out-of-service"), taint("node.cluster.x-k8s.io/uninitialized")}
	if diff := cmp.Diff(keep, SanitizeTaints(all, tc)); diff != "" {
		t.Errorf("with flags (-want +got):\n%s", diff)
	}
	if !tc.IsStartupTaint("example.com/booting-2") || tc.IsStatusTaint("example.com/booting-2") ||
		!tc.IsStatusTaint("gpu-health") || tc.IsStartupTaint("gpu-health") {
		t.Error("startup and status taints mixed up")
	}
}

func exampleNode(name string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{corev1.LabelHostname: name, "pool": "a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }
func removing(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taint(ToBeDeletedTaint)) }
func deleted(n *corev1.Node) {
	now := metav1.NewTime(time.Unix(1_800_000_000, 0))
	n.DeletionTimestamp = &now
}
func noReadyCondition(n *corev1.Node) { n.Status.Conditions = nil }

func TestGoodExample(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"ready", exampleNode("n"), true},
		{"tainted as a deletion candidate only", exampleNode("n", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{taint(DeletionCandidateTaint)}
		}), true},
		{"not ready", exampleNode("n", notReady), false},
		{"no Ready condition", exampleNode("n", noReadyCondition), false},
		{"cordoned", exampleNode("n", cordoned), false},
		{"being removed by the autoscaler", exampleNode("n", removing), false},
		{"deleted", exampleNode("n", deleted), false},
	}
	for _, tt := range tests {
		if got := GoodExample(tt.node); got != tt.want {
			t.Errorf("%s: GoodExample = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestExample: the first good example by name, whatever the order and the
// creation times; the first other node by name when none is good.
func TestExample(t *testing.T) {
	old := func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(time.Unix(1_700_000_000, 0)) }
	tests := []struct {
		name     string
		nodes    []*corev1.Node
		want     string
		wantGood bool
	}{
		{"none", nil, "", false},
		{"first good by name, not the oldest", []*corev1.Node{
			exampleNode("d"), exampleNode("a", notReady, old), exampleNode("c"), exampleNode("b", removing)}, "c", true},
		{"a good one after bad ones", []*corev1.Node{
			exampleNode("a", cordoned), exampleNode("b", deleted), exampleNode("z")}, "z", true},
		{"last resort: first by name", []*corev1.Node{
			exampleNode("c", notReady), exampleNode("b", removing), exampleNode("d", cordoned, old)}, "b", false},
		{"nil entries skipped", []*corev1.Node{nil, exampleNode("a")}, "a", true},
	}
	for _, tt := range tests {
		got, good := Example(tt.nodes)
		name := ""
		if got != nil {
			name = got.Name
		}
		if name != tt.want || good != tt.wantGood {
			t.Errorf("%s: Example = %q good %v, want %q good %v", tt.name, name, good, tt.want, tt.wantGood)
		}
		// The order of the input does not matter.
		reversed := make([]*corev1.Node, len(tt.nodes))
		for i, n := range tt.nodes {
			reversed[len(tt.nodes)-1-i] = n
		}
		if again, _ := Example(reversed); again != got {
			t.Errorf("%s: the choice depends on the order of the nodes", tt.name)
		}
	}
}

func TestFromNode(t *testing.T) {
	node := exampleNode("real-1", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{taint("dedicated"), taint(DeletionCandidateTaint), taint(corev1.TaintNodeUnreachable)}
		n.Spec.ProviderID = "kwok://real-1"
	})
	before := node.DeepCopy()
	got := FromNode(node, "group-template", TaintConfig{})
	if got.Name != "group-template" || got.UID != "" || got.Labels[corev1.LabelHostname] != "group-template" || got.Labels["pool"] != "a" {
		t.Errorf("identity not rewritten: %+v", got.ObjectMeta)
	}
	if diff := cmp.Diff([]corev1.Taint{taint("dedicated")}, got.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, node); diff != "" {
		t.Errorf("the node itself was modified (-before +after):\n%s", diff)
	}
	if unlabelled := FromNode(&corev1.Node{}, "t", TaintConfig{}); unlabelled.Labels[corev1.LabelHostname] != "t" {
		t.Errorf("a node without labels gets no hostname label: %v", unlabelled.Labels)
	}
}

func TestBeingDeleted(t *testing.T) {
	if BeingDeleted(exampleNode("n")) || !BeingDeleted(exampleNode("n", removing)) {
		t.Error("BeingDeleted does not follow the ToBeDeleted taint")
	}
	if BeingDeleted(exampleNode("n", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taint(DeletionCandidateTaint)} })) {
		t.Error("a deletion candidate is not being deleted")
	}
}
