package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/localcluster"
)

// TestGangLocalClusterWorkloadAPI proves that localcluster serves the Workload
// API and runs kube-scheduler's gang scheduling: a PodGroup with a gang policy
// of minCount 3 is created, its first two pods stay unbound (kube-scheduler
// holds them), and a third pod gets all three bound. Deleting the PodGroup once
// its pods are gone completes, which needs the PodGroupProtection controller
// to take off the finalizer the API server's admission puts on it.
func TestGangLocalClusterWorkloadAPI(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	const nodeName = "gang-localcluster-1"
	createNodes(t, ctx, localcluster.NodeSpec{Name: nodeName, Labels: map[string]string{"e2e-gang": nodeName},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")}})

	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3},
		}},
	}
	if _, err := cluster.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, pg.Name, err)
	}
	pod := func(name string, group *string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"e2e-gang": nodeName},
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			},
		}
		if group != nil {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: group}
		}
		return p
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, p.Name, err)
		}
	}
	create(pod("worker-0", ptr.To(pg.Name)))
	create(pod("worker-1", ptr.To(pg.Name)))
	// The scheduler sees pods in the order they were created: once a pod
	// created after the gang's is bound, it has met the gang's two pods and
	// held them, had it not, they would have been bound first (same priority,
	// queued earlier, room for all).
	create(pod("after", nil))
	waitFor(t, ctx, "pod after bound", func(ctx context.Context) error {
		return podsBound(ctx, ns, "after")
	})
	for _, name := range []string{"worker-0", "worker-1"} {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("pod %s of a gang of minCount 3 bound to %s with only 2 pods created", name, p.Spec.NodeName)
		}
	}

	create(pod("worker-2", ptr.To(pg.Name)))
	waitFor(t, ctx, "the gang's 3 pods bound", func(ctx context.Context) error {
		return podsBound(ctx, ns, "worker-0", "worker-1", "worker-2")
	})

	// With its pods gone, the PodGroup's protection finalizer comes off and it
	// is deleted.
	if err := cluster.Client.CoreV1().Pods(ns).DeleteCollection(ctx,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.SchedulingV1beta1().PodGroups(ns).Delete(ctx, pg.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "PodGroup deleted", func(ctx context.Context) error {
		got, err := cluster.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, pg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, finalizers %v", got.Finalizers)
	})
}

// podsBound says which of the named pods are not bound yet.
func podsBound(ctx context.Context, ns string, names ...string) error {
	var unbound []string
	for _, name := range names {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName == "" {
			unbound = append(unbound, name)
		}
	}
	if len(unbound) > 0 {
		return fmt.Errorf("not bound: %v", unbound)
	}
	return nil
}
