package claims

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/quota/resources"
)

// ClaimDevices is what one claim charges: its devices per class, under the
// class's resource name and under the extended resource name its DeviceClass
// gives it. Once the claim is allocated, the allocation result is the truth;
// before, the requests are counted as the package describes, and the All
// requests are returned unsized. A class that does not exist is reported,
// once per class, and its devices are counted under the class's name only.
func ClaimDevices(claim *resourceapi.ResourceClaim, lookup Lookup) (corev1.ResourceList, []Unsized, []error) {
	perClass := map[string]int64{}
	var unsized []Unsized
	if claim.Status.Allocation != nil {
		classOf := requestClasses(claim)
		for i := range claim.Status.Allocation.Devices.Results {
			if class, ok := classOf[claim.Status.Allocation.Devices.Results[i].Request]; ok {
				perClass[class]++
			}
		}
	} else {
		unsized = requested(claim, perClass)
	}
	if len(perClass) == 0 {
		return nil, unsized, nil
	}
	out := make(corev1.ResourceList, 2*len(perClass))
	var problems []error
	for _, class := range sortedKeys(perClass) {
		q := *resource.NewQuantity(perClass[class], resource.DecimalSI)
		addOne(out, resources.DeviceClassResource(class), q)
		dc := lookup.Class(class)
		if dc == nil {
			problems = append(problems, fmt.Errorf("ResourceClaim %s/%s: DeviceClass %q does not exist: its devices count under %s only",
				claim.Namespace, claim.Name, class, resources.DeviceClassResource(class)))
			continue
		}
		if e := dc.Spec.ExtendedResourceName; e != nil && *e != "" {
			addOne(out, corev1.ResourceName(*e), q)
		}
	}
	return out, unsized, problems
}

// requestClasses maps each request and subrequest name an allocation result
// may carry ("request" or "request/subrequest") to its device class.
func requestClasses(claim *resourceapi.ResourceClaim) map[string]string {
	out := map[string]string{}
	for i := range claim.Spec.Devices.Requests {
		r := &claim.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			out[r.Name] = r.Exactly.DeviceClassName
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			out[r.Name+"/"+sub.Name] = sub.DeviceClassName
		}
	}
	return out
}

// requested counts an unallocated claim's requests into perClass and returns
// its All requests. A request of a kind this version does not know counts
// nothing, as in core ResourceQuota.
func requested(claim *resourceapi.ResourceClaim, perClass map[string]int64) []Unsized {
	var unsized []Unsized
	ref := claim.Namespace + "/" + claim.Name
	for i := range claim.Spec.Devices.Requests {
		r := &claim.Spec.Devices.Requests[i]
		switch {
		case len(r.FirstAvailable) > 0:
			// Any one subrequest is allocated: per class, the largest count.
			worst := map[string]int64{}
			for j := range r.FirstAvailable {
				sub := &r.FirstAvailable[j]
				if sub.AllocationMode == resourceapi.DeviceAllocationModeAll {
					unsized = append(unsized, Unsized{Claim: ref, Request: r.Name + "/" + sub.Name, Class: sub.DeviceClassName})
					continue
				}
				worst[sub.DeviceClassName] = max(worst[sub.DeviceClassName], exactCount(sub.AllocationMode, sub.Count))
			}
			for class, n := range worst {
				perClass[class] = resources.SaturatingAdd(perClass[class], n)
			}
		case r.Exactly != nil:
			if r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll {
				unsized = append(unsized, Unsized{Claim: ref, Request: r.Name, Class: r.Exactly.DeviceClassName})
				continue
			}
			perClass[r.Exactly.DeviceClassName] = resources.SaturatingAdd(perClass[r.Exactly.DeviceClassName], exactCount(r.Exactly.AllocationMode, r.Exactly.Count))
		}
	}
	return unsized
}

// exactCount is an ExactCount request's count; the API defaults the mode to
// ExactCount and the count to 1, which a claim built in memory may lack.
func exactCount(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	switch {
	case mode != "" && mode != resourceapi.DeviceAllocationModeExactCount:
		return 0
	case count <= 0:
		return 1
	}
	return count
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
