package report

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// claimLookup reads the snapshot's claims and classes with quota/claims' rule,
// as the scheduler charges them; nil when claims could not be listed.
func (s Snapshot) claimLookup() claims.Lookup {
	if !s.ClaimsListed {
		return nil
	}
	byKey := make(map[string]*resourceapi.ResourceClaim, len(s.Claims))
	for _, c := range s.Claims {
		if c != nil {
			byKey[c.Namespace+"/"+c.Name] = c
		}
	}
	return claims.Listed{
		Claims:  func(namespace, name string) *resourceapi.ResourceClaim { return byKey[namespace+"/"+name] },
		Classes: claims.NewClasses(s.DeviceClasses),
	}
}

// podCharge is what pod asks of its leaf: its requests and its claims'
// devices, less the shared claims charged already in the tree (nil: none is).
// The notes say what of its claims could not be read.
func podCharge(pod *corev1.Pod, lookup claims.Lookup, charged *elastic.Tree) (corev1.ResourceList, []string) {
	if lookup == nil {
		return resources.PodRequests(pod), nil
	}
	ch, err := claims.PodCharge(pod, lookup)
	var notes []string
	if err != nil {
		notes = append(notes, fmt.Sprintf("the pod's devices are counted in part: %v", err))
	}
	for _, u := range ch.Unsized {
		notes = append(notes, fmt.Sprintf("claim %s request %s asks for all matching devices of the node it lands on: not counted until allocated", u.Claim, u.Request))
	}
	return ch.Request(func(key types.UID) bool { return charged != nil && charged.Tracks(key) }), notes
}
