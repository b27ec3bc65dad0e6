package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=flavor;flavors;rf
// +kubebuilder:storageversion

// ResourceFlavor describes a kind of node by its labels. A quota node that names
// a flavor in attributes.resourceflavors only places pods on nodes carrying all of
// the flavor's nodeLabels.
type ResourceFlavor struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorSpec mirrors Kueue's fields; only NodeLabels has an effect here.
type ResourceFlavorSpec struct {
	// NodeLabels are the labels a node must carry to belong to this flavor.
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=8
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`

	// NodeTaints is accepted for Kueue compatibility and ignored.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	NodeTaints []corev1.Taint `json:"nodeTaints,omitempty"`

	// Tolerations is accepted for Kueue compatibility and ignored.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologyName is accepted for Kueue compatibility and ignored.
	// +optional
	TopologyName *string `json:"topologyName,omitempty"`
}

// +kubebuilder:object:root=true

// ResourceFlavorList is a list of ResourceFlavors.
type ResourceFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceFlavor `json:"items"`
}
