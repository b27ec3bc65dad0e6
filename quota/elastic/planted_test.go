package elastic

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/test/oracle"
)

// TestOracleCatchesPlantedBug admits pods as the scheduler plugin does (bind
// what the tree admits, charge it) and lets test/oracle, which shares no code
// with this package, judge the pods bound. Built as is, the third pod is
// refused at the root and the oracle finds nothing; built with -tags
// quotascale_plantedbug, children's usage is not charged to their parent
// (planted_bug.go), the root admits it, and the oracle must report the root
// over its max.
func TestOracleCatchesPlantedBug(t *testing.T) {
	object := treeOf(spec{Name: "root", Min: cpu("6"), Max: cpu("6"), Children: []spec{
		{Name: "a", Min: cpu("3"), Max: cpu("6"), Namespaces: []string{"ns-a"}},
		{Name: "b", Min: cpu("3"), Max: cpu("6"), Namespaces: []string{"ns-b"}},
	}})
	object.UID, object.Generation = "uid-eqt", 1
	object.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	object.Status.ObservedGeneration = 1
	object.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.ConditionValid, Status: metav1.ConditionTrue, Reason: "Valid"}}
	tree := mustBuild(t, object)
	judge := oracle.New()
	judge.SetTree(object)

	var admitted []string
	for _, p := range []struct{ ns, name, cpu string }{{"ns-a", "a1", "3"}, {"ns-b", "b1", "3"}, {"ns-a", "a2", "2"}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, UID: types.UID(p.ns + "/" + p.name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
				Resources: corev1.ResourceRequirements{Requests: cpu(p.cpu)}}}},
		}
		if v := tree.Admit(pod.Namespace, pod.Spec.Containers[0].Resources.Requests); !v.Admitted() {
			continue
		}
		pod.Spec.NodeName = "node-1"
		tree.AddPod(pod)
		judge.SetPod(pod, false)
		admitted = append(admitted, p.name)
	}

	violations := judge.Violations(func(*corev1.Pod) (types.UID, error) { return "", fmt.Errorf("no pod was preempted") })
	t.Logf("admitted %q; the oracle's violations: %q", admitted, violations)
	if !plantedLeafOnly {
		if len(admitted) != 2 || len(violations) > 0 {
			t.Errorf("the real check admitted %q (want a1 and b1), and the oracle reports %q", admitted, violations)
		}
		return
	}
	if len(violations) == 0 {
		t.Errorf("the oracle missed the planted uncharged parent (admitted %q)", admitted)
	}
}
