package claims

import corev1 "k8s.io/api/core/v1"

// deviceClassResource stands in for resources.DeviceClassResource until it lands.
func deviceClassResource(class string) corev1.ResourceName {
	return corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
}
