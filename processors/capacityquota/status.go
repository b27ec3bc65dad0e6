package capacityquota

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/quotascale/quotascale/quota/resources"
)

// Resource is the CapacityQuota resource.
var Resource = autoscalingv1beta1.SchemeGroupVersion.WithResource("capacityquotas")

// StatusWriter writes each quota's status as upstream does: status.used from the
// registered nodes only, observedGeneration, and the
// cluster-autoscaler.kubernetes.io/valid and Reconciled conditions. Only the
// leader runs it.
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
		desired := desiredStatus(s.Object, s.Quota, s.DeviceClassMissing, s.DeviceNotes)
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

func desiredStatus(obj *autoscalingv1beta1.CapacityQuota, s capacity.QuotaStatus, missing bool, notes []string) autoscalingv1beta1.CapacityQuotaStatus {
	status := *obj.Status.DeepCopy()
	status.ObservedGeneration = obj.Generation
	setValidConditions(&status, obj.Generation, s)
	setDeviceClassesCondition(&status, obj, missing, notes)
	status.Used = nil
	if s.Valid {
		status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: capacity.FromCoreList(s.Used)}
	}
	return status
}

// setValidConditions writes the valid and Reconciled conditions as upstream's
// status controller does: an invalid quota is not reconciled (its usage is not
// computed), a valid one is, since the processor's snapshot of the nodes is
// what status.used is computed from.
func setValidConditions(status *autoscalingv1beta1.CapacityQuotaStatus, generation int64, s capacity.QuotaStatus) {
	valid := metav1.Condition{
		Type: autoscalingv1beta1.ValidCondition, Status: metav1.ConditionTrue,
		Reason: autoscalingv1beta1.ValidReason, Message: autoscalingv1beta1.ValidMessage,
		ObservedGeneration: generation,
	}
	reconciled := metav1.Condition{
		Type: autoscalingv1beta1.ReconciledCondition, Status: metav1.ConditionTrue,
		Reason: autoscalingv1beta1.ReconciliationSucceededReason, Message: autoscalingv1beta1.ReconciledMessage,
		ObservedGeneration: generation,
	}
	if !s.Valid {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, autoscalingv1beta1.InvalidReason, s.Message
		reconciled.Status, reconciled.Reason, reconciled.Message = metav1.ConditionFalse, autoscalingv1beta1.ReconciliationFailedReason, autoscalingv1beta1.ValidationFailedMessage
	}
	meta.SetStatusCondition(&status.Conditions, valid)
	meta.SetStatusCondition(&status.Conditions, reconciled)
}

// setDeviceClassesCondition writes DeviceClassesCondition on a quota that
// limits a device class, and removes it from one that no longer does.
func setDeviceClassesCondition(status *autoscalingv1beta1.CapacityQuotaStatus, obj *autoscalingv1beta1.CapacityQuota, missing bool, notes []string) {
	limitsDevices := false
	for name := range obj.Spec.Limits.Resources {
		if _, ok := resources.DeviceClassOf(corev1.ResourceName(name)); ok {
			limitsDevices = true
		}
	}
	if !limitsDevices {
		meta.RemoveStatusCondition(&status.Conditions, autoscalingv1beta1.DeviceClassesCondition)
		return
	}
	cond := metav1.Condition{
		Type: autoscalingv1beta1.DeviceClassesCondition, Status: metav1.ConditionTrue,
		Reason: autoscalingv1beta1.DeviceClassesCountedReason, Message: "every device class the limits name is found and counted",
		ObservedGeneration: obj.Generation,
	}
	if len(notes) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, autoscalingv1beta1.DeviceSelectorFailedReason, strings.Join(notes, "; ")
		if missing {
			cond.Reason = autoscalingv1beta1.DeviceClassNotFoundReason
		}
	}
	meta.SetStatusCondition(&status.Conditions, cond)
}
