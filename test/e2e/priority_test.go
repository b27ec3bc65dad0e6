package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// createPriorityClass creates a PriorityClass, keeping one of that name that
// exists, and waits until the API server's Priority admission resolves it:
// admission reads classes from an informer, which lags the write, and a pod
// naming the class in between is refused ("no PriorityClass with name ...").
func createPriorityClass(t *testing.T, ctx context.Context, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := cluster.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating PriorityClass %s: %v", name, err)
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "priority-probe-", Namespace: metav1.NamespaceDefault},
		Spec:       corev1.PodSpec{PriorityClassName: name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause"}}},
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := cluster.Client.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("waiting for admission to resolve PriorityClass %s: %v", name, err)
	}
}
