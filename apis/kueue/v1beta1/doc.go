// Package v1beta1 holds Kueue's ResourceFlavor, kueue.x-k8s.io/v1beta1. Quotascale
// reads only spec.nodeLabels; the other Kueue fields are accepted so that Kueue
// users' objects apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=kueue.x-k8s.io
package v1beta1
