package oracle

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SetResourceSlice records a ResourceSlice added or updated.
func (o *Oracle) SetResourceSlice(s *resourcev1.ResourceSlice) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.slices[s.Name] = s
	o.checkQuotasLocked("ResourceSlice " + s.Name + " written")
}

// DeleteResourceSlice records a ResourceSlice gone.
func (o *Oracle) DeleteResourceSlice(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.slices, name)
	o.checkQuotasLocked("ResourceSlice " + name + " deleted")
}

// deviceAmount is how many devices of class node publishes: the devices of
// its node-local ResourceSlices, each pool in its newest generation, whose
// driver an allocation result has shown serving the class. The oracle does
// not evaluate a class's selectors; it learns a class's drivers from the
// claims the scheduler allocated, which is exact for classes that select by
// driver, as the scenarios' do.
func (o *Oracle) deviceAmountLocked(node *corev1.Node, class string) resource.Quantity {
	drivers := o.classDriversLocked(class)
	type pool struct{ driver, name string }
	newest := map[pool]int64{}
	for _, s := range o.slices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == node.Name {
			p := pool{s.Spec.Driver, s.Spec.Pool.Name}
			if g, ok := newest[p]; !ok || s.Spec.Pool.Generation > g {
				newest[p] = s.Spec.Pool.Generation
			}
		}
	}
	seen := map[string]bool{}
	for _, s := range o.slices {
		if s.Spec.NodeName == nil || *s.Spec.NodeName != node.Name || !drivers[s.Spec.Driver] ||
			s.Spec.Pool.Generation != newest[pool{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		for _, d := range s.Spec.Devices {
			seen[s.Spec.Driver+"/"+s.Spec.Pool.Name+"/"+d.Name] = true
		}
	}
	return *resource.NewQuantity(int64(len(seen)), resource.DecimalSI)
}

// deviceClassOf is the class a device-class resource name counts.
func deviceClassOf(name corev1.ResourceName) (string, bool) {
	class, ok := strings.CutSuffix(string(name), deviceClassSuffix)
	return class, ok && class != ""
}

// classDriversLocked are the drivers the allocated claims show serving class.
func (o *Oracle) classDriversLocked(class string) map[string]bool {
	drivers := map[string]bool{}
	for _, c := range o.draLocked().claims {
		if c.Status.Allocation == nil {
			continue
		}
		classOf := requestClasses(c)
		for _, result := range c.Status.Allocation.Devices.Results {
			if classOf[result.Request] == class {
				drivers[result.Driver] = true
			}
		}
	}
	return drivers
}
