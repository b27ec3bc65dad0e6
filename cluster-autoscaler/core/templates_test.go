package core

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// TestTemplateFromExistingNode: a group with a ready node gets that node as
// its template, without the taints upstream strips (its own, node-condition,
// startup and status ones, by flag and by prefix), with the DaemonSet and
// mirror pods running there; a DaemonSet not yet running there is added only
// with --force-ds.
func TestTemplateFromExistingNode(t *testing.T) {
	opts := config.Defaults()
	opts.StartupTaints = []string{"cilium.io/agent-not-ready"}
	opts.IgnoreTaints = []string{"legacy-ignore"}
	opts.StatusTaints = []string{"gpu-health"}
	n := node("real-1", "g", "8", "32Gi")
	keep := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	n.Spec.Taints = []corev1.Taint{keep}
	for _, k := range []string{"DeletionCandidateOfClusterAutoscaler", corev1.TaintNodeNotReady,
		"cilium.io/agent-not-ready", "legacy-ignore", "gpu-health", IgnoreTaintPrefix + "a", StartupTaintPrefix + "b", StatusTaintPrefix + "c"} {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	}
	tolerateAll := corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}
	running := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "kube-system", UID: "ds-running"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: tolerateAll}}}
	missing := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: "kube-system", UID: "ds-missing"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: tolerateAll}}}
	dsPod := testPod("kube-system", "running-abc", "", "100m", "real-1")
	dsPod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(running, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
	mirror := testPod("kube-system", "static-real-1", "", "100m", "real-1")
	mirror.OwnerReferences = nil
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	workload := testPod("default", "web", "rs", "1", "real-1")
	groupOf := func(*corev1.Node) string { return "g" }
	for _, force := range []bool{false, true} {
		tmpl := newTemplates(newTaintConfig(opts), force, []*corev1.Node{n}, groupOf,
			[]*corev1.Pod{dsPod, mirror, workload}, []*appsv1.DaemonSet{running, missing})
		got, err := tmpl.forGroup(context.Background(), &fakeGroup{id: "g"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]corev1.Taint{keep}, got.Node.Spec.Taints); diff != "" {
			t.Errorf("force-ds=%v: taints (-want +got):\n%s", force, diff)
		}
		var names []string
		for _, p := range got.Pods {
			names = append(names, p.Name)
		}
		want := []string{"running-abc", "static-real-1"}
		if force {
			want = append(want, "missing-real-1")
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("force-ds=%v: template pods (-want +got):\n%s", force, diff)
		}
	}
}
