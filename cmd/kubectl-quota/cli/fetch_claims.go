package cli

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	claimsResource  = resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	classesResource = resourceapi.SchemeGroupVersion.WithResource("deviceclasses")
)

// claims reads every ResourceClaim and DeviceClass, so that pods' devices
// are charged as the scheduler charges them. Without them (not served, or
// not readable) pods count their requests alone, and a note says so.
func (r *reader) claims(ctx context.Context) {
	claims, err := r.dyn.Resource(claimsResource).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.unreadable("listing ResourceClaims (devices are left out of usage)", claimsResource, err)
		return
	}
	classes, err := r.dyn.Resource(classesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.unreadable("listing DeviceClasses (devices are left out of usage)", classesResource, err)
		return
	}
	r.snap.Claims = convertAll[resourceapi.ResourceClaim](r, claims)
	r.snap.DeviceClasses = convertAll[resourceapi.DeviceClass](r, classes)
	r.snap.ClaimsListed = true
}
