package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceName names a resource a CapacityQuota limits: cpu, memory, nodes or any
// extended resource such as nvidia.com/gpu.
type ResourceName string

const (
	// ResourceCPU is counted in whole cores.
	ResourceCPU ResourceName = "cpu"
	// ResourceMemory is counted in bytes.
	ResourceMemory ResourceName = "memory"
	// ResourceNodes counts one per node.
	ResourceNodes ResourceName = "nodes"

	// ValidCondition is the condition the autoscaler maintains. Only quotas where it
	// is True are enforced. Its type, reasons and messages are upstream's, so
	// that tools written for upstream's autoscaler read it unchanged.
	ValidCondition = "cluster-autoscaler.kubernetes.io/valid"
	// ValidReason is the reason of a True ValidCondition.
	ValidReason = "ValidationSucceeded"
	// InvalidReason is the reason of a False ValidCondition, whose message
	// lists every problem, joined by "; ".
	InvalidReason = "ValidationFailed"
	// ValidMessage is the message of a True ValidCondition.
	ValidMessage = "CapacityQuota is valid"

	// ReconciledCondition says whether the autoscaler brought the quota's
	// status up to date with its spec and the cluster's nodes; upstream's
	// public API defines it on both v1alpha1 and v1beta1.
	ReconciledCondition = "Reconciled"
	// ReconciliationSucceededReason is the reason of a True ReconciledCondition.
	ReconciliationSucceededReason = "ReconciliationSucceeded"
	// ReconciliationFailedReason is the reason of a False ReconciledCondition.
	ReconciliationFailedReason = "ReconciliationFailed"
	// ReconciledMessage is the message of a True ReconciledCondition.
	ReconciledMessage = "CapacityQuota successfully reconciled"
	// ValidationFailedMessage is the message of a False ReconciledCondition on
	// an invalid quota: its status.used is not computed.
	ValidationFailedMessage = "Validation failed"

	// DeviceClassesCondition is Quotascale's, on quotas that limit a device
	// class (<class>.deviceclass.resource.k8s.io/devices): True when every
	// class they name exists and its selectors evaluate on every node's
	// devices; False otherwise, with the reason and each limit's problem.
	// Such a quota is valid and enforced either way.
	DeviceClassesCondition = "quotascale.io/device-classes"
	// DeviceClassesCountedReason: every class is found and evaluates.
	DeviceClassesCountedReason = "Counted"
	// DeviceClassNotFoundReason: a limit names a class the cluster does not
	// have; it matches no device until the class is created.
	DeviceClassNotFoundReason = "DeviceClassNotFound"
	// DeviceSelectorFailedReason: a class's CEL selectors fail on some
	// devices, which are then not counted.
	DeviceSelectorFailedReason = "DeviceSelectorFailed"
)

// ResourceList maps resource names to quantities.
type ResourceList map[ResourceName]resource.Quantity

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cq
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="cluster-autoscaler.kubernetes.io/valid")].status`
// +kubebuilder:printcolumn:name="CPU Used",type=string,JSONPath=`.status.used.resources.cpu`
// +kubebuilder:printcolumn:name="CPU Limit",type=string,JSONPath=`.spec.limits.resources.cpu`
// +kubebuilder:printcolumn:name="Memory Used",type=string,JSONPath=`.status.used.resources.memory`,priority=1
// +kubebuilder:printcolumn:name="Memory Limit",type=string,JSONPath=`.spec.limits.resources.memory`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="cluster-autoscaler.kubernetes.io/valid")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// CapacityQuota caps what the cluster autoscaler may provision for the nodes its
// selector matches. Usage is the summed status.capacity of matching nodes plus the
// nodes that are still being provisioned; a scale-up that would take any matching
// quota past its limit on any resource is capped or refused.
type CapacityQuota struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CapacityQuotaSpec `json:"spec"`

	// +optional
	Status CapacityQuotaStatus `json:"status,omitempty"`
}

// CapacityQuotaSpec selects nodes and limits them.
type CapacityQuotaSpec struct {
	// Selector picks the nodes the quota applies to, by node labels. A missing or
	// empty selector selects every node.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Limits are the ceilings on the selected nodes' summed capacity.
	// +required
	Limits CapacityQuotaLimits `json:"limits"`
}

// CapacityQuotaLimits holds the ceilings per resource.
type CapacityQuotaLimits struct {
	// Resources maps a resource name to its ceiling. cpu and memory are read from
	// node capacity, nodes counts nodes, and any other name (nvidia.com/gpu, ...) is
	// read from node capacity under that name. A device class's devices, as the
	// nodes' ResourceSlices publish them, are limited under core ResourceQuota's
	// name <class>.deviceclass.resource.k8s.io/devices; an extended resource name a
	// DeviceClass serves counts its devices too, on nodes whose capacity lacks it.
	// Names are at most 63 characters, device-class names at most 261. Quantities
	// must be non-negative integers: "32Gi", "2k" and "10" are accepted; "3.67Gi",
	// "500m" and "1000m" are not.
	// +required
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:rule="self.all(key, size(key) <= 63 || (key.endsWith('.deviceclass.resource.k8s.io/devices') && size(key) <= 261))",message="Resource names must be 63 characters or less."
	// +kubebuilder:validation:XValidation:rule="self.all(key, type(self[key]) == int ? self[key] >= 0 : (!self[key].startsWith('-') && quantity(self[key]).isInteger()))",message="All resource quantities must be non-negative integers."
	Resources ResourceList `json:"resources"`
}

// CapacityQuotaStatus is written by the autoscaler's leader.
type CapacityQuotaStatus struct {
	// Used is the summed capacity of the registered nodes the quota selects. It is
	// for people to read; enforcement also counts nodes still being provisioned.
	// +optional
	Used *CapacityQuotaUsage `json:"used,omitempty"`

	// Conditions include cluster-autoscaler.kubernetes.io/valid and Reconciled.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// CapacityQuotaUsage is the usage per limited resource.
type CapacityQuotaUsage struct {
	Resources ResourceList `json:"resources"`
}

// +kubebuilder:object:root=true

// CapacityQuotaList is a list of CapacityQuotas.
type CapacityQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityQuota `json:"items"`
}
