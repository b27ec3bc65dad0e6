package e2e

import (
	"context"
	"fmt"
	"testing"
)

// TestDRATreeSharedClaimBothUsersBound: two pods share one ResourceClaim of 2
// devices in a leaf whose device max is 2. The claim is charged once, so
// both are bound; a third pod with a 1-device claim of its own waits, its
// FailedScheduling event naming the leaf and 2 devices used. A claim charged
// once per user would leave the second user waiting, or show 4 used.
//
// The users are created together, so that the second one's scheduling cycle
// may overlap the first's binding (the claim allocated in the scheduler's
// memory only, and Reserve handed a copy of the pod), or one after the
// other, the claim already allocated and reserved for the first.
func TestDRATreeSharedClaimBothUsersBound(t *testing.T) {
	for _, tc := range []struct {
		name, suffix string
		// firstBound waits for the first user to be bound before the
		// second is created.
		firstBound bool
	}{
		{name: "users created together", suffix: "share-together"},
		{name: "second user after the first is bound", suffix: "share-after", firstBound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			team := createNamespace(t, ctx, "")
			w := newDRAWorld(t, ctx, tc.suffix, 8, "")
			applyDeviceTree(t, ctx, team, fmt.Sprintf("%q: 2", w.devicesResource()))
			w.createClaim(t, ctx, team, "shared", 2)
			createDRAPod(t, ctx, team, "user-1", "shared", oneCPU)
			if tc.firstBound {
				waitFor(t, ctx, "the first user bound", func(ctx context.Context) error { return podsBound(ctx, team, "user-1") })
			}
			createDRAPod(t, ctx, team, "user-2", "shared", oneCPU)
			settle(t, ctx, "both users of the shared claim running", wantRunning([]string{team}, []int{2}))

			w.createClaim(t, ctx, team, "own", 1)
			createDRAPod(t, ctx, team, "own", "own", oneCPU)
			assertPendingPodEvent(t, ctx, team, fmt.Sprintf(`exceeded elastic quota "team": %s used 2, requested 1, max 2`, w.devicesResource()))
			settle(t, ctx, "the pod with its own claim waiting", wantRunning([]string{team}, []int{2}))
		})
	}
}
