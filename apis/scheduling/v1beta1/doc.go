// Package v1beta1 holds the ElasticQuotaTree API, scheduling.sigs.k8s.io/v1beta1, as
// Alibaba Cloud ACK's capacity scheduling defines it.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.sigs.k8s.io
package v1beta1
