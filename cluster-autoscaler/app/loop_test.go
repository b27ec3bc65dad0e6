package app

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRecentlyUnschedulable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(status corev1.ConditionStatus, reason string, ago time.Duration, node string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-ago)),
		}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"marked unschedulable 5s ago", pod(corev1.ConditionFalse, corev1.PodReasonUnschedulable, 5*time.Second, ""), true},
		{"marked unschedulable 10s ago", pod(corev1.ConditionFalse, corev1.PodReasonUnschedulable, 10*time.Second, ""), true},
		{"marked unschedulable a minute ago", pod(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Minute, ""), false},
		{"scheduling gated", pod(corev1.ConditionFalse, corev1.PodReasonSchedulingGated, time.Second, ""), false},
		{"bound", pod(corev1.ConditionTrue, "", time.Second, "n1"), false},
		{"not yet tried", &corev1.Pod{}, false},
	} {
		if got := recentlyUnschedulable(tc.pod, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
