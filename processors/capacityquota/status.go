package capacityquota

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/quota/capacity"
)

// Resource is the CapacityQuota resource.
var Resource = autoscalingv1beta1.SchemeGroupVersion.WithResource("capacityquotas")

// StatusWriter writes each quota's status as upstream does: status.used from the
// registered nodes only, observedGeneration, and the
// cluster-autoscaler.kubernetes.io/valid condition. Only the leader runs it.
type StatusWriter struct {
	Client    dynamic.Interface
	Processor *Processor
}

// Write updates every quota whose status differs from what the processor
// computed; conflicts are left for the next loop.
func (w *StatusWriter) Write(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var firstErr error
	for _, s := range w.Processor.Statuses() {
		desired := desiredStatus(s.Object, s.Quota)
		if apiequality.Semantic.DeepEqual(desired, s.Object.Status) {
			continue
		}
		updated := s.Object.DeepCopy()
		updated.Status = desired
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
		if err != nil {
			return fmt.Errorf("encoding status of CapacityQuota %s: %w", s.Object.Name, err)
		}
		u := &unstructured.Unstructured{Object: raw}
		u.SetAPIVersion(autoscalingv1beta1.SchemeGroupVersion.String())
		u.SetKind("CapacityQuota")
		if _, err := w.Client.Resource(Resource).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
			err = fmt.Errorf("updating status of CapacityQuota %s: %w", s.Object.Name, err)
			logger.Error(err, "Writing CapacityQuota status")
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

func desiredStatus(obj *autoscalingv1beta1.CapacityQuota, s capacity.QuotaStatus) autoscalingv1beta1.CapacityQuotaStatus {
	status := *obj.Status.DeepCopy()
	status.ObservedGeneration = obj.Generation
	cond := metav1.Condition{
		Type: autoscalingv1beta1.ValidCondition, Status: metav1.ConditionTrue,
		Reason: autoscalingv1beta1.ValidReason, Message: autoscalingv1beta1.ValidMessage,
		ObservedGeneration: obj.Generation,
	}
	if !s.Valid {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, autoscalingv1beta1.InvalidReason, s.Message
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	status.Used = nil
	if s.Valid {
		status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: capacity.FromCoreList(s.Used)}
	}
	return status
}
