package resources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DeviceClassResource is the name under which a device class's devices are
// counted: core ResourceQuota's `<class>.deviceclass.resource.k8s.io/devices`.
// Using the same name lets one manifest speak of devices to ResourceQuota,
// CapacityQuota and the ElasticQuotaTree alike.
func DeviceClassResource(class string) corev1.ResourceName {
	return corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
}

// DeviceClassOf is the inverse of DeviceClassResource: the device class a
// resource name counts, if it is a device-class name at all. The class must be
// a valid DeviceClass name (a DNS subdomain), so that a limit such as
// ".deviceclass.resource.k8s.io/devices" or "A_B.deviceclass..." is not taken
// for a class that could never exist.
func DeviceClassOf(name corev1.ResourceName) (string, bool) {
	class, ok := strings.CutSuffix(string(name), corev1.ResourceClaimsPerClass)
	if !ok || len(validation.IsDNS1123Subdomain(class)) > 0 {
		return "", false
	}
	return class, true
}
