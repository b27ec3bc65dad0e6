package kwok

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodeGroupShapes(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
nodeGroups:
- name: b
  minSize: 1
  maxSize: 3
  labels: {pool: b}
  taints: [{key: dedicated, value: ml, effect: NoSchedule}]
  capacity: {cpu: "2", memory: 8Gi}
  allocatable: {cpu: 1930m}
  provisioningDelay: 4s
  failures: {outOfResources: true, failAfter: 1}
- name: a
  maxSize: 1
  capacity: {cpu: "1", memory: 1Gi}
`))
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := cfg.NodeGroupShapes()
	if err != nil {
		t.Fatal(err)
	}
	q := resource.MustParse
	want := []NodeGroupShape{
		{Name: "a", MaxSize: 1, Labels: map[string]string{},
			Capacity:    corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi"), "pods": q("110")},
			Allocatable: corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi"), "pods": q("110")}},
		{Name: "b", MinSize: 1, MaxSize: 3, Labels: map[string]string{"pool": "b"},
			Taints:            []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
			Capacity:          corev1.ResourceList{"cpu": q("2"), "memory": q("8Gi"), "pods": q("110")},
			Allocatable:       corev1.ResourceList{"cpu": q("1930m"), "memory": q("8Gi"), "pods": q("110")},
			ProvisioningDelay: 4 * time.Second,
			Failure:           &FailureShape{OutOfResources: true, Code: ErrorCodeOutOfResources, Message: "kwok cloud: out of resources for node group b", FailAfter: 1}},
	}
	if diff := cmp.Diff(want, shapes, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("shapes (-want +got):\n%s", diff)
	}
}
