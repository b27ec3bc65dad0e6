// Package nodetemplatetest is one cluster that the tests of every program
// building node templates or counting upcoming nodes feed to that program:
// the autoscaler's core, its Cluster API provider, its registry and
// kubectl-quota. Each test compares its program's answer with the answer
// written out here by hand, so the programs agree with each other. It is
// imported by tests only.
package nodetemplatetest

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The group is a Cluster API MachineDeployment, named as the clusterapi
// provider names it; its nodes carry the label Cluster API puts on them.
const (
	Namespace      = "ns"
	DeploymentName = "md"
	GroupID        = "MachineDeployment/" + Namespace + "/" + DeploymentName
	// DeploymentLabel is Cluster API's label naming a node's MachineDeployment.
	DeploymentLabel = "cluster.x-k8s.io/deployment-name"
	// NodeLabel names the node a template was made from, in every template,
	// since each program names its template its own way.
	NodeLabel = "nodetemplatetest.quotascale.io/node"
)

// Cluster is the group in mixed states and the answers every program must
// give about it.
type Cluster struct {
	// Nodes are the group's registered nodes; each has a provider ID
	// "test://NAME" and a Machine of the same name.
	Nodes []*corev1.Node
	// Target is the group's target size. Unregistered are its instances
	// without a node that may still register, Late those past the
	// provisioning time.
	Target             int
	Unregistered, Late []string

	// WantExample is the node every template is made from, WantTaints the
	// taints every template has, WantUpcoming the nodes every program counts
	// as upcoming.
	WantExample  string
	WantTaints   []corev1.Taint
	WantUpcoming int
}

// Mixed is a group of six nodes: the oldest not ready, one being removed by
// the autoscaler, one cordoned, one being deleted, and two good ones created
// after all the others, the first of which by name carries taints a new node
// would not have. Its target is one more than its nodes, and two instances
// have not registered: one still may, one is late.
func Mixed(now time.Time) Cluster {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	node := func(name string, created time.Duration, ready bool, taints ...corev1.Taint) *corev1.Node {
		status := corev1.ConditionTrue
		if !ready {
			status = corev1.ConditionFalse
		}
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created), Labels: map[string]string{
				corev1.LabelHostname: name, DeploymentLabel: DeploymentName, NodeLabel: name,
				"cloud.google.com/compute-class": "mixed",
			}},
			Spec: corev1.NodeSpec{ProviderID: "test://" + name, Taints: taints},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3800m"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
			},
		}
	}
	dedicated := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	cordoned := node("md-c", 50*time.Minute, true, dedicated)
	cordoned.Spec.Unschedulable = true
	deleting := node("md-b", 40*time.Minute, true, dedicated)
	deleting.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
	deleting.Finalizers = []string{"test/keep"}
	return Cluster{
		Nodes: []*corev1.Node{
			node("md-f", 5*time.Minute, true, dedicated),
			node("md-a", 3*time.Hour, false, dedicated, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}),
			node("md-0", 2*time.Hour, true, dedicated, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1800000000", Effect: corev1.TaintEffectNoSchedule}),
			cordoned,
			deleting,
			node("md-e", 10*time.Minute, true, dedicated,
				corev1.Taint{Key: "DeletionCandidateOfClusterAutoscaler", Value: "1800000000", Effect: corev1.TaintEffectPreferNoSchedule},
				corev1.Taint{Key: "startup-taint.cluster-autoscaler.kubernetes.io/cni", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}),
		},
		Target:       7,
		Unregistered: []string{"test://md-g"},
		Late:         []string{"test://md-h"},
		WantExample:  "md-e",
		WantTaints:   []corev1.Taint{dedicated},
		WantUpcoming: 2,
	}
}

// CheckTemplate fails t unless template was made from WantExample and has
// WantTaints.
func (c Cluster) CheckTemplate(t testing.TB, template *corev1.Node) {
	t.Helper()
	if from := template.Labels[NodeLabel]; from != c.WantExample {
		t.Errorf("template made from %s, want %s", from, c.WantExample)
	}
	if !reflect.DeepEqual(c.WantTaints, template.Spec.Taints) {
		t.Errorf("template taints %v, want %v", template.Spec.Taints, c.WantTaints)
	}
}
