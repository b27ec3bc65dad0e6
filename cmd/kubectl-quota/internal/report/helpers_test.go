package report

import (
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// now is the fixed clock of every test; objects are created relative to it.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// seedTree is seed 000's tree (namespace1..4), generation 1, created an hour ago.
func seedTree(t *testing.T) *schedulingv1beta1.ElasticQuotaTree {
	t.Helper()
	tree := &schedulingv1beta1.ElasticQuotaTree{}
	readYAML(t, "testdata/seed-tree.yaml", tree)
	tree.Generation = 1
	tree.CreationTimestamp = ago(time.Hour)
	return tree
}

// withStatus gives tree the status the scheduler writes for the tree in force,
// with the figures the model computes from pods.
func withStatus(t *testing.T, tree *schedulingv1beta1.ElasticQuotaTree, pods []*corev1.Pod) *schedulingv1beta1.ElasticQuotaTree {
	t.Helper()
	built, err := elastic.Build(tree)
	if err != nil {
		t.Fatal(err)
	}
	live, _ := chargePods(built, pods, nil)
	out := tree.DeepCopy()
	out.Status.ObservedGeneration = tree.Generation
	out.Status.Conditions = []metav1.Condition{
		{Type: "Active", Status: metav1.ConditionTrue, Reason: "Enforced", Message: fmt.Sprintf("generation %d is in force", tree.Generation)},
		{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "the tree satisfies every rule"},
	}
	out.Status.Quotas = live.Status()
	out.Status.LastValid = &schedulingv1beta1.TreeGeneration{Generation: tree.Generation, Spec: *tree.Spec.DeepCopy()}
	return out
}

// withHeld is tree with status reporting cpu held on node, measured age
// before now.
func withHeld(tree *schedulingv1beta1.ElasticQuotaTree, node, cpu string, age time.Duration) *schedulingv1beta1.ElasticQuotaTree {
	out := tree.DeepCopy()
	for i := range out.Status.Quotas {
		if out.Status.Quotas[i].Name == node {
			out.Status.Quotas[i].Held = list("cpu", cpu)
		}
	}
	out.Status.QuotasTime = &metav1.Time{Time: now.Add(-age)}
	return out
}

// replicaPods are n pods of Deployment name in namespace, each requesting cpu;
// bound to node unless it is empty. The first is the oldest.
func replicaPods(namespace, name string, n int, cpu, node string, created time.Duration) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-5d8c9-%d", name, i), Namespace: namespace,
				UID:               types.UID(fmt.Sprintf("%s-%s-%d", namespace, name, i)),
				Labels:            map[string]string{"app": name, "pod-template-hash": "5d8c9"},
				CreationTimestamp: ago(created - time.Duration(i)*time.Second),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
					Name: name + "-5d8c9", UID: "rs", Controller: ptr.To(true)}},
			},
			Spec: corev1.PodSpec{
				NodeName: node,
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: list("cpu", cpu), Limits: list("cpu", cpu)}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		if node != "" {
			p.Status.Phase = corev1.PodRunning
		}
		out = append(out, p)
	}
	return out
}

// seedQuota is seed 001's CapacityQuota: 8 cpu on the test compute class.
func seedQuota(t *testing.T) *autoscalingv1beta1.CapacityQuota {
	t.Helper()
	q := &autoscalingv1beta1.CapacityQuota{}
	readYAML(t, "testdata/seed-quota.yaml", q)
	return q
}

const seedGroup = "n2-standard-2"

// seedNodes are n registered nodes of seed 001's node group, as the kwok
// provider labels them: 2 cpu capacity, 1930m allocatable.
func seedNodes(n int) []*corev1.Node {
	var out []*corev1.Node
	for i := 0; i < n; i++ {
		out = append(out, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:              fmt.Sprintf("%s-node%d", seedGroup, i),
				CreationTimestamp: ago(time.Duration(10-i) * time.Minute),
				Labels: map[string]string{
					"quotascale.io/node-group":        seedGroup,
					"cloud.google.com/compute-class":  "test-capacityquota-class",
					"cloud.google.com/machine-family": "n2",
					"kubernetes.io/hostname":          fmt.Sprintf("%s-node%d", seedGroup, i),
					"topology.kubernetes.io/zone":     "us-central1-f",
				},
			},
			Status: corev1.NodeStatus{
				Capacity:    list("cpu", "2", "memory", "8Gi", "pods", "110"),
				Allocatable: list("cpu", "1930m", "memory", "8Gi", "pods", "110"),
			},
		})
	}
	return out
}

// seedWorkloadPod is one of seed 001's pending pods.
func seedWorkloadPod() *corev1.Pod {
	p := replicaPods("default", "test-capacityquota-workload", 1, "500m", "", 3*time.Minute)[0]
	p.Spec.NodeSelector = map[string]string{"cloud.google.com/compute-class": "test-capacityquota-class"}
	return p
}

func autoscalerWith(groups ...NodeGroupStatus) *AutoscalerStatus {
	return &AutoscalerStatus{Source: "ConfigMap kube-system/cluster-autoscaler-status", Time: now.Add(-5 * time.Second), NodeGroups: groups}
}

func event(pod *corev1.Pod, reason, from, message string, at time.Duration) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + "." + reason, Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Reason:         reason, Message: message, Type: corev1.EventTypeNormal,
		Source:        corev1.EventSource{Component: from},
		LastTimestamp: ago(at), Count: 1,
	}
}

func treesOf(trees ...*schedulingv1beta1.ElasticQuotaTree) []*schedulingv1beta1.ElasticQuotaTree {
	return trees
}

func quotasOf(quotas ...*autoscalingv1beta1.CapacityQuota) []*autoscalingv1beta1.CapacityQuota {
	return quotas
}

func eventsOf(events ...*corev1.Event) []*corev1.Event { return events }
