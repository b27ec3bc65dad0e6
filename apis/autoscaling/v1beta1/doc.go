// Package v1beta1 holds the CapacityQuota API, autoscaling.x-k8s.io/v1beta1.
//
// The schema follows the upstream cluster-autoscaler API field for field so that
// manifests written for upstream apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
