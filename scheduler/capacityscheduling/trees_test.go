package capacityscheduling

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// TestInvalidGenerationsAreAnnouncedOnce: each invalid generation of the tree
// gets one event however often it is synced, and the last valid generation
// stays in force throughout. (What the plugin remembers of them is bounded by
// elastic.Tracker; see TestTrackerMemoryIsBounded.)
func TestInvalidGenerationsAreAnnouncedOnce(t *testing.T) {
	c := newQuotaCache(nil, testingclock.NewFakeClock(epoch), defaultReclaimHoldDuration)
	sync := func(trees ...*schedulingv1beta1.ElasticQuotaTree) []treeEvent {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.syncTreesLocked(logr.Discard(), trees)
	}
	if events := sync(treeObject(t, teamsTree)); len(events) != 1 || events[0].reason != eventReasonEnforced {
		t.Fatalf("events for a valid tree: %+v", events)
	}
	const last = 50
	invalidEvents := 0
	for g := int64(2); g <= last; g++ {
		invalid := treeObject(t, `
spec:
  root:
    name: root
    min: {cpu: 4}
    max: {cpu: 2}
`)
		invalid.Generation = g
		for range 3 {
			for _, e := range sync(invalid) {
				if e.reason != eventReasonInvalid {
					t.Fatalf("generation %d: unexpected event %+v", g, e)
				}
				invalidEvents++
			}
		}
		want := fmt.Sprintf("generation %d is invalid; generation 1 stays in force", g)
		if d := c.lifecycle.decisions["kube-system/elasticquotatree"]; d.active.Message != want || c.tree == nil {
			t.Fatalf("generation %d: Active %q, tree in force %v; want %q", g, d.active.Message, c.tree != nil, want)
		}
	}
	if invalidEvents != last-1 {
		t.Errorf("%d InvalidElasticQuotaTree events for %d invalid generations synced 3 times each", invalidEvents, last-1)
	}
}
