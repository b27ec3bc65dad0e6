package capacityscheduling

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/quota/gang"
)

// gangState counts what the cache keeps about gangs and pending pods.
func (h *harness) gangState() map[string]int {
	c := h.plugin.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return map[string]int{
		"gang index":     len(c.gangPods.members),
		"gang of pod":    len(c.gangPods.keyOf),
		"refusals":       len(c.gangRefusals),
		"never fits":     len(c.gangsNever),
		"asked":          len(c.gangAsked),
		"reservations":   len(c.reservations),
		"warned":         len(c.gangWarned),
		"requests":       len(c.requests),
		"holds":          len(c.holds),
		"claim sharers":  len(c.claims.sharers),
		"claims of pods": len(c.claims.of),
	}
}

// TestGangChurnLeavesNothing creates and deletes 1,000 gangs through the API,
// half of them Workload API PodGroups and half ACK's labels: some refused as
// never fitting, some reserved, some with a member relabelled into another
// gang or out of every gang mid-way. Once every pod is gone, the cache keeps
// nothing about any of them.
func TestGangChurnLeavesNothing(t *testing.T) {
	const gangs = 1000
	var podGroups []*schedulingapi.PodGroup
	var created []*corev1.Pod
	for i := range gangs {
		name := fmt.Sprintf("g%d", i)
		cpu := "1"
		if i%10 == 0 {
			cpu = "5" // two of 5 never fit team-a's max of 8
		}
		members := ackGang("team-a", name, "2", 2, cpu)
		if i%2 == 1 {
			var pg *schedulingapi.PodGroup
			pg, members = workloadGang("team-a", name, 2, 2, cpu)
			podGroups = append(podGroups, pg)
		}
		created = append(created, members...)
	}
	h := newHarness(t, world{tree: gangTree, nodes: []*corev1.Node{node("n1", "32")}, podGroups: podGroups})
	// The pods reach the plugin's handlers as the informer would deliver
	// them: added, updated, deleted.
	for _, p := range created {
		h.plugin.onPod(nil, p)
	}
	for i := 0; i < len(created); i += 2 {
		first, second := created[i], created[i+1]
		if g := i / 2; g%7 == 3 {
			h.reserve(first)
		} else {
			h.preFilter(first)
		}
		if second.Labels != nil && (i/2)%5 == 0 {
			moved := second.DeepCopy()
			moved.Labels[gang.LabelName] = "moved-" + second.Labels[gang.LabelName]
			if (i/2)%3 == 0 {
				moved.Labels = nil // out of every gang
			}
			h.plugin.onPod(second, moved)
			created[i+1] = moved
		}
	}
	if got := h.gangState(); got["refusals"] == 0 || got["never fits"] == 0 || got["reservations"] == 0 {
		t.Fatalf("the churn made no refusal, impossible gang or reservation to forget: %v", got)
	}
	for _, p := range created {
		h.plugin.cache.deletePod(p)
	}
	want := map[string]int{}
	for k := range h.gangState() {
		want[k] = 0
	}
	var got map[string]int
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		got = h.gangState()
		for k, n := range got {
			if n != want[k] {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("after every gang pod was deleted, the cache keeps %v", got)
	}
}

// waitFor waits until cond holds of the cache, under its lock.
func (h *harness) waitFor(what string, cond func(*quotaCache) bool) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		h.plugin.cache.mu.Lock()
		defer h.plugin.cache.mu.Unlock()
		return cond(h.plugin.cache), nil
	}); err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}
