package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The soak's shared claims: a ResourceClaim of 2 devices used by 2 or 3 pods
// of a leaf's namespace, on a node outside the pools (the pools' pods ask
// for pool nodes) whose ResourceSlice has a leaf's 2 devices for each leaf
// and room for a claim on its way out. Each leaf's max of 2 devices holds a
// shared claim only if it is charged once. A leaf's next claim replaces its
// last one.

// soakDevices are the devices of the soak's DRA node.
const soakDevices = 12

// sharedClaim is the last shared claim of a namespace.
type sharedClaim struct {
	name  string
	users []string
}

// shareClaim replaces the shared claim of a random leaf's namespace by a new
// one with 2 or 3 users.
func (s *soak) shareClaim(ctx context.Context) {
	ns := s.namespaces[s.rng.Intn(4)]
	if last, ok := s.shared[ns]; ok {
		s.countSharedBoundIn(ctx, ns, last)
		s.deleteSharedClaim(ctx, ns, last)
	}
	c := sharedClaim{name: fmt.Sprintf("shared-%d", s.counts.Operations)}
	s.dra.createClaim(s.t, ctx, ns, c.name, 2)
	for i := range 2 + s.rng.Intn(2) {
		user := fmt.Sprintf("%s-%d", c.name, i+1)
		createDRAPod(s.t, ctx, ns, user, c.name, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")})
		c.users = append(c.users, user)
	}
	s.shared[ns] = c
	s.counts.ClaimsShared++
}

// deleteSharedClaim deletes a shared claim's users, then the claim.
func (s *soak) deleteSharedClaim(ctx context.Context, ns string, c sharedClaim) {
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	for _, user := range c.users {
		if err := cluster.Client.CoreV1().Pods(ns).Delete(ctx, user, now); err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("deleting pod %s/%s: %v", ns, user, err)
		}
	}
	if err := cluster.Client.ResourceV1().ResourceClaims(ns).Delete(ctx, c.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		s.t.Errorf("deleting ResourceClaim %s/%s: %v", ns, c.name, err)
	}
}

// countSharedBound counts the shared claims in place whose users are all bound.
func (s *soak) countSharedBound(ctx context.Context) {
	for _, ns := range slices.Sorted(maps.Keys(s.shared)) {
		s.countSharedBoundIn(ctx, ns, s.shared[ns])
	}
}

// countSharedBoundIn counts c if all its users are bound.
func (s *soak) countSharedBoundIn(ctx context.Context, ns string, c sharedClaim) {
	if podsBound(ctx, ns, c.users...) == nil {
		s.counts.ClaimsSharedBound++
	}
}
