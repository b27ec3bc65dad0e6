package capacityquota

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/capacity"
)

// TestDesiredStatusConditions: the status writer sets upstream's conditions,
// with upstream's types, reasons and messages, keeps a condition's
// lastTransitionTime while its status holds, and leaves conditions it does not
// own (such as the Valid condition upstream's 1.36 wrote) alone.
func TestDesiredStatusConditions(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	const problem = `selector must not use label key "node.kubernetes.io/instance-type"`
	valid := capacity.QuotaStatus{Name: "q", Valid: true, Message: autoscalingv1beta1.ValidMessage,
		Used: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	invalid := capacity.QuotaStatus{Name: "q", Message: problem}
	cond := func(typ string, status metav1.ConditionStatus, reason, message string, generation int64, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation, LastTransitionTime: at}
	}
	validTrue := func(generation int64, at metav1.Time) metav1.Condition {
		return cond(autoscalingv1beta1.ValidCondition, metav1.ConditionTrue, "ValidationSucceeded", "CapacityQuota is valid", generation, at)
	}
	reconciledTrue := func(generation int64, at metav1.Time) metav1.Condition {
		return cond("Reconciled", metav1.ConditionTrue, "ReconciliationSucceeded", "CapacityQuota successfully reconciled", generation, at)
	}
	// invalidNow is an invalid quota's conditions, both transitioned now.
	invalidNow := func(generation int64) []metav1.Condition {
		return []metav1.Condition{
			cond(autoscalingv1beta1.ValidCondition, metav1.ConditionFalse, "ValidationFailed", problem, generation, metav1.Time{}),
			cond("Reconciled", metav1.ConditionFalse, "ReconciliationFailed", "Validation failed", generation, metav1.Time{}),
		}
	}
	upstreamValid := cond("Valid", metav1.ConditionTrue, "ValidationSucceeded", "CapacityQuota is valid", 1, earlier)
	for _, tc := range []struct {
		name       string
		generation int64
		existing   []metav1.Condition
		quota      capacity.QuotaStatus
		want       []metav1.Condition
		// wantNew lists the conditions whose lastTransitionTime is now.
		wantNew []string
	}{
		{
			name: "a new valid quota is valid and reconciled", generation: 1,
			quota:   valid,
			want:    []metav1.Condition{validTrue(1, metav1.Time{}), reconciledTrue(1, metav1.Time{})},
			wantNew: []string{autoscalingv1beta1.ValidCondition, "Reconciled"},
		},
		{
			name: "a new invalid quota lists its problems and is not reconciled", generation: 1,
			quota:   invalid,
			want:    invalidNow(1),
			wantNew: []string{autoscalingv1beta1.ValidCondition, "Reconciled"},
		},
		{
			name: "a new generation keeps the transition times", generation: 2,
			existing: []metav1.Condition{validTrue(1, earlier), reconciledTrue(1, earlier)},
			quota:    valid,
			want:     []metav1.Condition{validTrue(2, earlier), reconciledTrue(2, earlier)},
		},
		{
			name: "a quota turned invalid is no longer reconciled", generation: 3,
			existing: []metav1.Condition{validTrue(2, earlier), reconciledTrue(2, earlier)},
			quota:    invalid,
			want:     invalidNow(3),
			wantNew:  []string{autoscalingv1beta1.ValidCondition, "Reconciled"},
		},
		{
			name: "upstream 1.36's Valid condition is left as it is", generation: 1,
			existing: []metav1.Condition{upstreamValid, reconciledTrue(1, earlier)},
			quota:    valid,
			want:     []metav1.Condition{upstreamValid, reconciledTrue(1, earlier), validTrue(1, metav1.Time{})},
			wantNew:  []string{autoscalingv1beta1.ValidCondition},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &autoscalingv1beta1.CapacityQuota{
				ObjectMeta: metav1.ObjectMeta{Name: "q", Generation: tc.generation},
				Spec: autoscalingv1beta1.CapacityQuotaSpec{Limits: autoscalingv1beta1.CapacityQuotaLimits{
					Resources: autoscalingv1beta1.ResourceList{"cpu": resource.MustParse("8")}}},
				Status: autoscalingv1beta1.CapacityQuotaStatus{Conditions: tc.existing},
			}
			got := desiredStatus(obj, tc.quota, false, nil)
			var gotNew []string
			for i, c := range got.Conditions {
				if !c.LastTransitionTime.Equal(&earlier) {
					if c.LastTransitionTime.IsZero() {
						t.Errorf("condition %s has no lastTransitionTime", c.Type)
					}
					gotNew = append(gotNew, c.Type)
					got.Conditions[i].LastTransitionTime = metav1.Time{}
				}
			}
			if diff := cmp.Diff(tc.want, got.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNew, gotNew, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions that transitioned now (-want +got):\n%s", diff)
			}
			if got.ObservedGeneration != tc.generation {
				t.Errorf("observedGeneration %d, want %d", got.ObservedGeneration, tc.generation)
			}
			if (got.Used != nil) != tc.quota.Valid {
				t.Errorf("status.used %v on a quota valid=%t", got.Used, tc.quota.Valid)
			}
		})
	}
}
