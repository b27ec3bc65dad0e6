// Package claims is the one rule for what a pod's Dynamic Resource Allocation
// devices charge an ElasticQuotaTree. The scheduler plugin and the autoscaler
// read a pod's device request with it, so both agree on which pods a leaf
// admits.
//
// A device class is counted under the name core ResourceQuota gives it,
// <class>.deviceclass.resource.k8s.io/devices, and, when its DeviceClass names
// spec.extendedResourceName, under that name too: a pod asking nvidia.com/gpu
// and a pod with a claim on the class behind nvidia.com/gpu count in one limit,
// once.
//
// What is charged, per pod:
//   - Own, charged with the pod: the pod's effective requests
//     (resources.PodRequests); the class devices behind each extended resource it
//     requests; and the devices of the claims made for this pod alone from a
//     ResourceClaimTemplate (pod.status.resourceClaimStatuses).
//   - Shared, one entry per ResourceClaim the pod names directly
//     (resourceClaimName): such a claim may be used by several pods, and is
//     charged once, to its namespace's leaf, while any charged pod uses it.
//
// A claim's devices: once allocated, its allocation result counts, one device
// per result, by the class of the request it was allocated for. Before that,
// an ExactCount request counts its count; a request with firstAvailable counts,
// per class, the largest count any of its subrequests asks (the worst case,
// as core ResourceQuota counts it); an All request is Unsized: how many devices
// it takes depends on the node (see Charge.Unsized).
//
// The claim the scheduler creates for a pod's extended resources
// (pod.status.extendedResourceClaimStatus) is not in the pod's spec and is never
// charged: the pod's own requests already charge those devices.
package claims

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/resources"
)

// Lookup is what the rule reads of the cluster. Implementations are listers
// (the scheduler's DRA manager, the autoscaler's informers) or maps in tests.
type Lookup interface {
	// Claim is the ResourceClaim namespace/name, nil when it does not exist.
	Claim(namespace, name string) *resourceapi.ResourceClaim
	// Class is the DeviceClass name, nil when it does not exist.
	Class(name string) *resourceapi.DeviceClass
	// ExtendedClass is the DeviceClass that serves the extended resource
	// name, either a class's spec.extendedResourceName or the implicit
	// deviceclass.resource.kubernetes.io/<class>; nil when none does.
	ExtendedClass(name corev1.ResourceName) *resourceapi.DeviceClass
}

// Charge is what a pod is charged.
type Charge struct {
	// Own is charged with the pod itself.
	Own corev1.ResourceList
	// Shared are the claims the pod names directly, sorted by name.
	Shared []Shared
	// Unsized are the requests with allocationMode All whose claim is not
	// allocated yet: they take every matching device of the chosen node,
	// which only the node tells. They charge nothing until sized.
	Unsized []Unsized
}

// Shared is a claim charged once whichever pods use it.
type Shared struct {
	// Key is what the claim is charged under (SharedKey).
	Key types.UID
	// Claim is namespace/name.
	Claim    string
	Requests corev1.ResourceList
}

// Unsized is an All request of a claim not yet allocated.
type Unsized struct {
	// Claim is namespace/name; Request is the request's name, or
	// request/subrequest.
	Claim, Request string
	Class          string
	// Shared says the claim is one of Charge.Shared, else it is the pod's own.
	Shared bool
}

// SharedKey is the key a directly named claim is charged under, distinct from
// any pod's UID.
func SharedKey(claimUID types.UID) types.UID { return "resourceclaim/" + claimUID }

// Request is what admitting the pod adds to its leaf: Own plus every shared
// claim that charged reports is not charged yet. It returns Own itself when
// nothing is added, so callers must not modify the result.
func (c Charge) Request(charged func(types.UID) bool) corev1.ResourceList {
	out := c.Own
	copied := false
	for _, s := range c.Shared {
		if charged(s.Key) {
			continue
		}
		if !copied {
			out, copied = c.Own.DeepCopy(), true
			if out == nil {
				out = corev1.ResourceList{}
			}
		}
		add(out, s.Requests)
	}
	return out
}

// Plain says the charge is requests alone, the very list PodChargeFrom was
// given: the pod has no claims and no extended resource a class serves, so a
// caller may keep what it derived from requests.
func (c Charge) Plain(requests corev1.ResourceList) bool {
	return len(c.Shared) == 0 && len(c.Unsized) == 0 &&
		reflect.ValueOf(c.Own).UnsafePointer() == reflect.ValueOf(requests).UnsafePointer()
}

// ErrClaimMissing is wrapped by PodCharge's error when a claim the pod needs
// does not exist (yet): the pod cannot be judged until it does.
var ErrClaimMissing = errors.New("ResourceClaim does not exist")

// PodCharge applies the rule to pod. The charge is always usable: what cannot
// be read is left out. The error, when not nil, joins every problem, sorted,
// each naming the pod and the claim or class: a claim that does not exist
// (wrapping ErrClaimMissing), a claim whose DeviceClass is gone (its devices
// are still counted by class name, but not under the extended resource the
// class named), a claim generated for another pod of the same name.
func PodCharge(pod *corev1.Pod, lookup Lookup) (Charge, error) {
	return PodChargeFrom(pod, resources.PodRequests(pod), lookup)
}

// PodChargeFrom is PodCharge for a caller that computed the pod's requests
// (resources.PodRequests) already. It does not modify requests; when the pod
// has neither claims nor extended resources a class serves, Own is requests
// itself.
func PodChargeFrom(pod *corev1.Pod, requests corev1.ResourceList, lookup Lookup) (Charge, error) {
	ch := Charge{Own: requests}
	var problems []error
	ch.Own = extendedDevices(ch.Own, lookup)
	if len(pod.Spec.ResourceClaims) == 0 {
		return ch, nil
	}
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, own, skip, err := claimName(pod, podClaim)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if skip {
			continue
		}
		claim := lookup.Claim(pod.Namespace, name)
		switch {
		case claim == nil:
			problems = append(problems, fmt.Errorf("pod %s/%s: %w: %s/%s", pod.Namespace, pod.Name, ErrClaimMissing, pod.Namespace, name))
			continue
		case own && !metav1OwnedBy(claim, pod.UID):
			problems = append(problems, fmt.Errorf("pod %s/%s: %w: %s/%s (the claim of that name belongs to another pod)",
				pod.Namespace, pod.Name, ErrClaimMissing, pod.Namespace, name))
			continue
		}
		devices, unsized, classProblems := ClaimDevices(claim, lookup)
		for i := range unsized {
			unsized[i].Shared = !own
		}
		ch.Unsized = append(ch.Unsized, unsized...)
		for _, p := range classProblems {
			problems = append(problems, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, p))
		}
		if own {
			ch.Own = addInto(ch.Own, devices)
			continue
		}
		ch.Shared = append(ch.Shared, Shared{Key: SharedKey(claim.UID), Claim: claim.Namespace + "/" + claim.Name, Requests: devices})
	}
	slices.SortFunc(ch.Shared, func(a, b Shared) int { return strings.Compare(a.Claim, b.Claim) })
	slices.SortFunc(problems, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	problems = slices.CompactFunc(problems, func(a, b error) bool { return a.Error() == b.Error() })
	return ch, errors.Join(problems...)
}

// claimName resolves a pod's claim entry: the claim's name, whether it was
// generated for this pod alone (from a template), and whether the pod needs no
// claim for it (the claim controller recorded none).
func claimName(pod *corev1.Pod, podClaim *corev1.PodResourceClaim) (name string, own, skip bool, err error) {
	switch {
	case podClaim.ResourceClaimName != nil:
		return *podClaim.ResourceClaimName, false, false, nil
	case podClaim.ResourceClaimTemplateName != nil:
		for i := range pod.Status.ResourceClaimStatuses {
			s := &pod.Status.ResourceClaimStatuses[i]
			if s.Name != podClaim.Name {
				continue
			}
			if s.ResourceClaimName == nil {
				return "", true, true, nil
			}
			return *s.ResourceClaimName, true, false, nil
		}
		return "", true, false, fmt.Errorf("pod %s/%s: %w: the claim %q from template %q is not created yet",
			pod.Namespace, pod.Name, ErrClaimMissing, podClaim.Name, *podClaim.ResourceClaimTemplateName)
	default:
		return "", false, true, nil
	}
}

func metav1OwnedBy(claim *resourceapi.ResourceClaim, uid types.UID) bool {
	for _, ref := range claim.OwnerReferences {
		if ref.UID == uid && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// extendedDevices adds, for each extended resource the requests name that a
// DeviceClass serves, that class's devices; for the implicit name
// deviceclass.resource.kubernetes.io/<class>, the class's explicit extended
// resource name as well. requests is copied before it is changed.
func extendedDevices(requests corev1.ResourceList, lookup Lookup) corev1.ResourceList {
	var extra corev1.ResourceList
	for name, q := range requests {
		if q.Sign() <= 0 || !maybeExtended(name) {
			continue
		}
		class := lookup.ExtendedClass(name)
		if class == nil {
			continue
		}
		if extra == nil {
			extra = corev1.ResourceList{}
		}
		addOne(extra, resources.DeviceClassResource(class.Name), q)
		if e := class.Spec.ExtendedResourceName; e != nil && corev1.ResourceName(*e) != name && strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix) {
			addOne(extra, corev1.ResourceName(*e), q)
		}
	}
	return addInto(requests, extra)
}

// maybeExtended rules out the resources no DeviceClass can serve, so a pod
// with cpu and memory only costs no lookup.
func maybeExtended(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
		return false
	}
	return !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// addInto returns base plus extra, copying base first when extra adds
// anything, so the caller's list is never changed.
func addInto(base, extra corev1.ResourceList) corev1.ResourceList {
	if len(extra) == 0 {
		return base
	}
	out := base.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	add(out, extra)
	return out
}

func add(dst, src corev1.ResourceList) {
	for name, q := range src {
		addOne(dst, name, q)
	}
}

func addOne(dst corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := dst[name]
	sum.Add(q)
	dst[name] = sum
}
