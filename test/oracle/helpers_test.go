package oracle

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// at is a second of the test's clock: API timestamps have whole seconds.
func at(second int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 12, 1, 10, 0, second, 0, time.UTC))
}

func testNode(name string, created int, labels map[string]string, capacity ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: at(created)}}
	n.Status.Capacity = resourceList(capacity...)
	return n
}

// resourceList reads "cpu=1930m", "memory=8Gi" pairs.
func resourceList(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range pairs {
		var name, value string
		for i := range p {
			if p[i] == '=' {
				name, value = p[:i], p[i+1:]
				break
			}
		}
		out[corev1.ResourceName(name)] = resource.MustParse(value)
	}
	return out
}

func testQuota(name string, created int, selector *metav1.LabelSelector, limits ...string) *autoscalingv1beta1.CapacityQuota {
	q := &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: at(created)}}
	q.Spec.Selector = selector
	q.Spec.Limits.Resources = autoscalingv1beta1.ResourceList{}
	for name, q2 := range resourceList(limits...) {
		q.Spec.Limits.Resources[autoscalingv1beta1.ResourceName(name)] = q2
	}
	return q
}

// written adds a managedFields entry for a write at second, to the main
// resource or to a subresource.
func written(q *autoscalingv1beta1.CapacityQuota, second int, subresource string) *autoscalingv1beta1.CapacityQuota {
	q = q.DeepCopy()
	t := at(second)
	q.ManagedFields = append(q.ManagedFields, metav1.ManagedFieldsEntry{Manager: "test", Operation: metav1.ManagedFieldsOperationApply, Time: &t, Subresource: subresource})
	return q
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func testPod(ns, name, node string, requests ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Requests: resourceList(requests...)}}}},
	}
}

func disrupted(p *corev1.Pod, reason string) *corev1.Pod {
	p = p.DeepCopy()
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason})
	return p
}

// deleting gives p a deletion timestamp, as a graceful deletion does.
func deleting(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	t := at(30)
	p.DeletionTimestamp = &t
	return p
}

func finished(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	return p
}

// judgement is what the scheduler's status says of a tree's generation.
type judgement int

const (
	unjudged judgement = iota
	judgedValid
	judgedInvalid
)

func testTree(name string, created int, generation int64, j judgement, root schedulingv1beta1.ElasticQuotaSpec) *schedulingv1beta1.ElasticQuotaTree {
	t := &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name,
		UID: types.UID("uid-" + name), Generation: generation, CreationTimestamp: at(created)}}
	t.Spec.Root = root
	switch j {
	case judgedValid, judgedInvalid:
		status := metav1.ConditionTrue
		if j == judgedInvalid {
			status = metav1.ConditionFalse
		}
		t.Status.ObservedGeneration = generation
		t.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.ConditionValid, Status: status, Reason: "Test"}}
	case unjudged:
		t.Status.ObservedGeneration = generation - 1
		if generation > 1 {
			t.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.ConditionValid, Status: metav1.ConditionTrue, Reason: "Test"}}
		}
	}
	return t
}

func quotaNode(name string, min, max []string, namespaces []string, children ...schedulingv1beta1.ElasticQuotaSpec) schedulingv1beta1.ElasticQuotaSpec {
	return schedulingv1beta1.ElasticQuotaSpec{Name: name, Min: resourceList(min...), Max: resourceList(max...), Namespaces: namespaces, Children: children}
}

func list(s ...string) []string { return s }

// preemptors answers PreemptorOf from a map of victim name to preemptor UID.
func preemptors(m map[string]types.UID) PreemptorOf {
	return func(victim *corev1.Pod) (types.UID, error) {
		uid, ok := m[victim.Name]
		if !ok {
			return "", fmt.Errorf("no Preempted event for %s", victim.Name)
		}
		return uid, nil
	}
}

func noPreemptors(*corev1.Pod) (types.UID, error) { return "", fmt.Errorf("no preemption expected") }
