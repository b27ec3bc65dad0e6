package scaledown

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestClassifyReplicaCount: upstream's replica-count rule. With
// --skip-nodes-with-custom-controller-pods, a pod of a ReplicaSet or
// ReplicationController asking for fewer than --min-replica-count replicas
// keeps its node, and so does one whose controller is gone, even when the pod
// is marked safe to evict; without that flag the rule does not apply.
func TestClassifyReplicaCount(t *testing.T) {
	rsIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	rcIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, rs := range []*appsv1.ReplicaSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "three"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)}},
	} {
		if err := rsIndex.Add(rs); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcIndex.Add(&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc-one"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1)}}); err != nil {
		t.Fatal(err)
	}
	controllers := &Controllers{ReplicaSets: appslisters.NewReplicaSetLister(rsIndex),
		ReplicationControllers: corelisters.NewReplicationControllerLister(rcIndex)}
	pod := func(kind, name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: ptr.To(true)}}}}
	}
	type verdict struct {
		Kind   podKind
		Reason string
	}
	safe := map[string]string{SafeToEvictAnnotation: "true"}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		skipCustom bool
		want       verdict
	}{
		{"ReplicaSet of 3, min 2", pod("ReplicaSet", "three", nil), true, verdict{podMoves, ""}},
		{"ReplicaSet of 1, min 2", pod("ReplicaSet", "one", nil), true, verdict{podBlocks, reasonMinReplicas}},
		{"ReplicaSet of 1, min 2, safe to evict", pod("ReplicaSet", "one", safe), true, verdict{podBlocks, reasonMinReplicas}},
		{"ReplicationController of 1, min 2", pod("ReplicationController", "rc-one", nil), true, verdict{podBlocks, reasonMinReplicas}},
		{"ReplicaSet gone", pod("ReplicaSet", "gone", nil), true, verdict{podBlocks, reasonNoController}},
		{"ReplicaSet of 1, without --skip-nodes-with-custom-controller-pods", pod("ReplicaSet", "one", nil), false, verdict{podMoves, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, reason := classify(tc.pod, nil, controllers, Options{MinReplicaCount: 2, SkipNodesWithCustomControllerPods: tc.skipCustom}, now)
			if diff := cmp.Diff(tc.want, verdict{kind, reason}); diff != "" {
				t.Errorf("classify (-want +got):\n%s", diff)
			}
		})
	}
}
