package capacityscheduling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// TestStatusHeldIsWhatNoBoundPodShows: status.quotas' held is, per quota
// node, the part of used that the bound pods do not show and that lasts: a
// gang's reservation with its members waiting for the rest of the gang, and
// a reclaim's hold. A pod of no gang being bound is not held: it shows as
// bound a moment later. quotasTime is stamped when the figures change.
func TestStatusHeldIsWhatNoBoundPodShows(t *testing.T) {
	running := testPod("running", "team-a", "2", "n1", low, time.Hour)
	job := ackGang("team-a", "job", "4", 4, "1")
	solo := testPod("solo", "team-b", "1", "", low, 0)
	preemptor := testPod("preemptor", "team-b", "2", "", high, 0)
	h := gangHarness(t, gangTree, append([]*corev1.Pod{running, solo, preemptor}, job...)...)
	h.waitForTree("the tree in force", func(t *elastic.Tree) bool { return t != nil })

	// The gang's first member opens its reservation of 4; solo is being
	// bound; a reclaim holds 2 for the preemptor.
	if _, status := h.reserve(job[0]); !status.IsSuccess() {
		t.Fatalf("job-1: %v", status)
	}
	if _, status := h.reserve(solo); !status.IsSuccess() {
		t.Fatalf("solo: %v", status)
	}
	h.plugin.cache.startHold(preemptor, "team-b", cpuList("2"), nil)

	w := &statusWriter{cache: h.plugin.cache, trees: h.plugin.trees.GetStore(), client: h.trees, interval: time.Second}
	obj, ok, err := w.trees.GetByKey(schedulingv1beta1.EnforcedNamespace + "/elasticquotatree")
	if err != nil || !ok {
		t.Fatalf("the tree object: %v", err)
	}
	tree := obj.(*schedulingv1beta1.ElasticQuotaTree)
	desired, ok := w.desiredStatus(tree)
	if !ok {
		t.Fatal("no status decided for the tree in force")
	}
	type figures struct{ Used, Held string }
	got := map[string]figures{}
	for _, q := range desired.Quotas {
		used, held := q.Used[corev1.ResourceCPU], q.Held[corev1.ResourceCPU]
		got[q.Name] = figures{Used: used.String(), Held: held.String()}
	}
	want := map[string]figures{
		"root":   {Used: "9", Held: "6"},
		"team-a": {Used: "6", Held: "4"},
		"team-b": {Used: "3", Held: "2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cpu used and held by quota node (-want +got):\n%s", diff)
	}

	stampQuotas(&desired, tree.Status, h.clock.Now())
	if desired.QuotasTime == nil || !desired.QuotasTime.Time.Equal(h.clock.Now()) {
		t.Errorf("quotasTime %v, want the time the changed figures were measured, %v", desired.QuotasTime, h.clock.Now())
	}
	written := desired.DeepCopy()
	h.clock.Step(time.Minute)
	stampQuotas(&desired, *written, h.clock.Now())
	if !desired.QuotasTime.Equal(written.QuotasTime) {
		t.Errorf("quotasTime moved to %v with the figures unchanged, want %v", desired.QuotasTime, written.QuotasTime)
	}
}
