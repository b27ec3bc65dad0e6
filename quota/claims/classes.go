package claims

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Classes indexes DeviceClasses by name and by the extended resource names
// they serve, for a Lookup built from a list (the autoscaler, tests). When two
// classes name the same extended resource, the newer one serves it, then the
// one with the lower name, as kube-scheduler decides; every class still
// charges its own claims under the name it gives.
type Classes struct {
	byName     map[string]*resourceapi.DeviceClass
	byExtended map[corev1.ResourceName]*resourceapi.DeviceClass
}

// NewClasses indexes classes; nil entries are skipped.
func NewClasses(classes []*resourceapi.DeviceClass) *Classes {
	c := &Classes{byName: map[string]*resourceapi.DeviceClass{}, byExtended: map[corev1.ResourceName]*resourceapi.DeviceClass{}}
	for _, dc := range classes {
		if dc == nil {
			continue
		}
		c.byName[dc.Name] = dc
		c.byExtended[corev1.ResourceName(resourceapi.ResourceDeviceClassPrefix+dc.Name)] = dc
		if e := dc.Spec.ExtendedResourceName; e != nil && *e != "" {
			name := corev1.ResourceName(*e)
			if held := c.byExtended[name]; held == nil || serves(dc, held) {
				c.byExtended[name] = dc
			}
		}
	}
	return c
}

// serves says whether a takes an extended resource name from b: it is newer,
// or as old with a lower name.
func serves(a, b *resourceapi.DeviceClass) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name < b.Name
}

// Class is the class name, nil when there is none.
func (c *Classes) Class(name string) *resourceapi.DeviceClass { return c.byName[name] }

// ExtendedClass is the class serving the extended resource name, nil when none.
func (c *Classes) ExtendedClass(name corev1.ResourceName) *resourceapi.DeviceClass {
	return c.byExtended[name]
}

// Listed is a Lookup over a claim getter and indexed classes.
type Listed struct {
	Claims func(namespace, name string) *resourceapi.ResourceClaim
	*Classes
}

// Claim is Claims(namespace, name), nil without a getter.
func (l Listed) Claim(namespace, name string) *resourceapi.ResourceClaim {
	if l.Claims == nil {
		return nil
	}
	return l.Claims(namespace, name)
}

var _ Lookup = Listed{}
