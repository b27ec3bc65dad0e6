package oracle

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Devices in the tree, restated from Kubernetes' API documentation rather
// than taken from the quota library:
//
//   - A pod uses the ResourceClaims its spec names: by resourceClaimName, or
//     the claim pod.status.resourceClaimStatuses records for a template.
//   - An allocated claim holds one device per allocation result, of the
//     device class of the request (or subrequest, "request/subrequest") the
//     result is for. A claim not allocated holds nothing yet.
//   - Devices of class C count under "C.deviceclass.resource.k8s.io/devices"
//     (core ResourceQuota's name) and, when the DeviceClass C names
//     spec.extendedResourceName E, under E too.
//   - A pod asking an extended resource E that a DeviceClass serves is served
//     by that class's devices: its request for E counts under the class's
//     name too. When several classes name E, the newest serves it, ties
//     broken by the lower name; "deviceclass.resource.kubernetes.io/C" always
//     names C (and counts under C's E as well).
//   - A leaf's usage holds each claim its counted pods use once, however many
//     of them share it.

const deviceClassSuffix = ".deviceclass.resource.k8s.io/devices"

const implicitExtendedPrefix = "deviceclass.resource.kubernetes.io/"

// draObjects are the DRA objects the oracle was fed.
type draObjects struct {
	claims  map[string]*resourcev1.ResourceClaim // by namespace/name
	classes map[string]*resourcev1.DeviceClass
}

func (o *Oracle) draLocked() *draObjects {
	if o.dra == nil {
		o.dra = &draObjects{claims: map[string]*resourcev1.ResourceClaim{}, classes: map[string]*resourcev1.DeviceClass{}}
	}
	return o.dra
}

// SetResourceClaim records a claim added or updated. A claim allocated now
// judges, on the devices it adds, the admission of the counted pods using it:
// the pod's binding may have been seen before its claim's allocation.
func (o *Oracle) SetResourceClaim(claim *resourcev1.ResourceClaim) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	before := o.draLocked().claims[key]
	o.dra.claims[key] = claim
	if claim.Status.Allocation == nil || (before != nil && before.Status.Allocation != nil) {
		return
	}
	// The allocation tells which driver serves the claim's classes, so the
	// nodes' devices of those classes count from now on.
	o.checkQuotasLocked("ResourceClaim " + key + " allocated")
	for _, st := range o.pods {
		if st.counted && slices.Contains(podClaimKeys(st.pod), key) {
			o.judgeAdmissionLocked(st, sortedKeys(o.claimDevicesLocked(claim)), "bound (its claim "+key+" allocated)")
		}
	}
}

// DeleteResourceClaim records a claim gone. Its devices may still show in
// the tree's status until the next write.
func (o *Oracle) DeleteResourceClaim(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := namespace + "/" + name
	if claim := o.draLocked().claims[key]; claim != nil {
		o.addReleasedLocked(namespace, o.mayHoldClaimLocked(claim))
	}
	delete(o.dra.claims, key)
}

// SetDeviceClass records a DeviceClass added or updated.
func (o *Oracle) SetDeviceClass(class *resourcev1.DeviceClass) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.draLocked().classes[class.Name] = class
}

// DeleteDeviceClass records a DeviceClass gone.
func (o *Oracle) DeleteDeviceClass(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.draLocked().classes, name)
}

// podClaimKeys are the namespace/name of the claims pod uses.
func podClaimKeys(pod *corev1.Pod) []string {
	var out []string
	for _, pc := range pod.Spec.ResourceClaims {
		name := ""
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if pc.ResourceClaimTemplateName != nil && s.Name == pc.Name && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
			}
		}
		if name != "" {
			out = append(out, pod.Namespace+"/"+name)
		}
	}
	return out
}

// claimDevicesLocked is what an allocated claim holds, by resource name; nil
// when it is not allocated.
func (o *Oracle) claimDevicesLocked(claim *resourcev1.ResourceClaim) corev1.ResourceList {
	if claim.Status.Allocation == nil {
		return nil
	}
	classOf := requestClasses(claim)
	out := corev1.ResourceList{}
	for _, result := range claim.Status.Allocation.Devices.Results {
		class, ok := classOf[result.Request]
		if !ok {
			continue
		}
		o.addClassDevicesLocked(out, class, resource.MustParse("1"))
	}
	return out
}

// addClassDevicesLocked adds q devices of class, under its name and its
// extended resource name.
func (o *Oracle) addClassDevicesLocked(into corev1.ResourceList, class string, q resource.Quantity) {
	addQuantity(into, corev1.ResourceName(class+deviceClassSuffix), q)
	if dc := o.draLocked().classes[class]; dc != nil && dc.Spec.ExtendedResourceName != nil && *dc.Spec.ExtendedResourceName != "" {
		addQuantity(into, corev1.ResourceName(*dc.Spec.ExtendedResourceName), q)
	}
}

// extendedDevicesLocked are the class devices behind the extended resources
// requests asks for.
func (o *Oracle) extendedDevicesLocked(requests corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range requests {
		if class, implicit := strings.CutPrefix(string(name), implicitExtendedPrefix); implicit {
			if o.draLocked().classes[class] != nil {
				o.addClassDevicesLocked(out, class, q)
			}
			continue
		}
		if class := o.servingLocked(name); class != "" {
			addQuantity(out, corev1.ResourceName(class+deviceClassSuffix), q)
		}
	}
	return out
}

// servingLocked is the class serving extended resource name: the newest of
// those naming it, then the lower name; "" when none does.
func (o *Oracle) servingLocked(name corev1.ResourceName) string {
	var best *resourcev1.DeviceClass
	for _, dc := range o.draLocked().classes {
		if dc.Spec.ExtendedResourceName == nil || corev1.ResourceName(*dc.Spec.ExtendedResourceName) != name {
			continue
		}
		switch {
		case best == nil, best.CreationTimestamp.Before(&dc.CreationTimestamp),
			best.CreationTimestamp.Equal(&dc.CreationTimestamp) && dc.Name < best.Name:
			best = dc
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// addDevicesLocked adds to used, up the tree, the devices of the counted pods
// include accepts: the claims each leaf's pods use, each once, and the class
// devices behind their extended resources.
func (o *Oracle) addDevicesLocked(t *quotaTree, used []corev1.ResourceList, include func(*podState) bool) {
	if o.dra == nil {
		return
	}
	seen := map[string]bool{}
	for _, st := range o.pods {
		leaf, ok := t.leafOf[st.pod.Namespace]
		if !st.counted || !ok || !include(st) {
			continue
		}
		devices := o.extendedDevicesLocked(st.requests)
		for _, key := range podClaimKeys(st.pod) {
			claim := o.dra.claims[key]
			if claim == nil || seen[key] {
				continue
			}
			seen[key] = true
			for name, q := range o.claimDevicesLocked(claim) {
				addQuantity(devices, name, q)
			}
		}
		for pos := leaf; pos >= 0; pos = t.nodes[pos].parent {
			for name, q := range devices {
				addQuantity(used[pos], name, q)
			}
		}
	}
}

// mayHoldDevicesLocked are the devices the scheduler's books may charge for
// pod: those behind its extended resources, its allocated claims' results,
// and what its claims not allocated yet ask for, which the scheduler charges
// from Reserve on, before the allocation is written.
func (o *Oracle) mayHoldDevicesLocked(pod *corev1.Pod, requests corev1.ResourceList) corev1.ResourceList {
	if o.dra == nil {
		return nil
	}
	out := o.extendedDevicesLocked(requests)
	for _, key := range podClaimKeys(pod) {
		if claim := o.dra.claims[key]; claim != nil {
			for name, q := range o.mayHoldClaimLocked(claim) {
				addQuantity(out, name, q)
			}
		}
	}
	return out
}

// mayHoldClaimLocked is what claim holds once allocated, or may hold when
// it is: each request's exact count of its class, every subrequest of a
// first-available list counted, and for a request of all of a class's
// devices more than any node has.
func (o *Oracle) mayHoldClaimLocked(claim *resourcev1.ResourceClaim) corev1.ResourceList {
	if claim.Status.Allocation != nil {
		return o.claimDevicesLocked(claim)
	}
	out := corev1.ResourceList{}
	add := func(class string, mode resourcev1.DeviceAllocationMode, count int64) {
		switch {
		case mode == resourcev1.DeviceAllocationModeAll:
			count = anyNumberOfDevices
		case count < 1:
			count = 1 // the API's default
		}
		o.addClassDevicesLocked(out, class, *resource.NewQuantity(count, resource.DecimalSI))
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil {
			add(r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count)
		}
		for _, sub := range r.FirstAvailable {
			add(sub.DeviceClassName, sub.AllocationMode, sub.Count)
		}
	}
	return out
}

// anyNumberOfDevices stands for a request of all of a class's devices not
// allocated yet: more than any node publishes.
const anyNumberOfDevices = 1 << 20

// admittedLocked are the resources a pod's admission asks for, sorted: its
// requests, and the devices of its allocated claims and of its extended
// resources.
func (o *Oracle) admittedLocked(st *podState) []corev1.ResourceName {
	names := requested(st.requests)
	if o.dra == nil {
		return names
	}
	pod := st.pod
	devices := o.extendedDevicesLocked(st.requests)
	for _, key := range podClaimKeys(pod) {
		if claim := o.dra.claims[key]; claim != nil {
			for name, q := range o.claimDevicesLocked(claim) {
				addQuantity(devices, name, q)
			}
		}
	}
	names = append(names, sortedKeys(devices)...)
	slices.Sort(names)
	return slices.Compact(names)
}

func addQuantity(into corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := into[name]
	sum.Add(q)
	into[name] = sum
}

// requestClasses maps each request of claim, and each subrequest as
// "request/subrequest", to the device class it asks for.
func requestClasses(claim *resourcev1.ResourceClaim) map[string]string {
	classOf := map[string]string{}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil {
			classOf[r.Name] = r.Exactly.DeviceClassName
		}
		for _, sub := range r.FirstAvailable {
			classOf[r.Name+"/"+sub.Name] = sub.DeviceClassName
		}
	}
	return classOf
}
