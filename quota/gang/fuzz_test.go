package gang

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzOf feeds arbitrary labels, PodGroup names and minCounts through the
// parsing every program relies on: it must never panic, and a gang it accepts
// always has a positive size and the name the pod gave.
func FuzzOf(f *testing.F) {
	f.Add("job", "3", "", int32(0), false)
	f.Add("job", "0", "train", int32(4), true)
	f.Add("", "x", "train", int32(-1), true)
	f.Add("job", "99999999999999999999", "", int32(0), false)
	f.Fuzz(func(t *testing.T, labelName, minAvailable, podGroupName string, minCount int32, gangPolicy bool) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
			Labels: map[string]string{LabelName: labelName, LabelMinAvailable: minAvailable}}}
		if podGroupName != "" {
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &podGroupName}
		}
		pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: podGroupName}}
		if gangPolicy {
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}
		}
		g, isGang, err := Of(pod, lookup(pg))
		if err != nil || !isGang {
			return
		}
		if g.MinCount < 1 {
			t.Fatalf("accepted gang %v with size %d", g.Key, g.MinCount)
		}
		if want, _ := RefOf(pod); g.Key != want {
			t.Fatalf("gang key %v, pod names %v", g.Key, want)
		}
		if _, standIns := Request(g, Members(g.Key, []*corev1.Pod{pod}), pod, Charger{}); standIns != int(g.MinCount)-1 {
			t.Fatalf("Request counted %d stand-ins for one member of %d", standIns, g.MinCount)
		}
	})
}
