package capacityscheduling

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// TestStatusWritesBatchWhileUsageKeepsChanging: changed figures are written
// at the next tick once usage has been still for an interval, or when the
// last write is busyIntervals intervals old; while pods keep being charged,
// no sooner.
func TestStatusWritesBatchWhileUsageKeepsChanging(t *testing.T) {
	const interval = 2 * time.Second
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}})
	h.waitForTree("the tree in force", func(t *elastic.Tree) bool { return t != nil })
	w := &statusWriter{cache: h.plugin.cache, trees: h.plugin.trees.GetStore(), client: h.trees, interval: interval}
	writes := h.statusWrites
	charged := 0
	charge := func() {
		charged++
		h.plugin.cache.updatePod(nil, testPod(fmt.Sprintf("p-%d", charged), "team-a", "100m", "n1", low, 0))
	}
	// tick advances the clock and runs the writer; after a write it waits
	// until the informer's copy shows it, so that the next tick compares
	// with what was written.
	tick := func(step string, advance time.Duration, wantWrites int) {
		t.Helper()
		before := writes()
		h.clock.Step(advance)
		w.writeAll(h.ctx)
		got := writes()
		if got != wantWrites {
			t.Fatalf("%s: %d status writes, want %d", step, got, wantWrites)
		}
		if got == before {
			return
		}
		if err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			obj, ok, err := w.trees.GetByKey(schedulingv1beta1.EnforcedNamespace + "/elasticquotatree")
			if err != nil || !ok {
				return false, err
			}
			stored := obj.(*schedulingv1beta1.ElasticQuotaTree)
			desired, ok := w.desiredStatus(stored)
			return ok && apiequality.Semantic.DeepEqual(desired, stored.Status), nil
		}); err != nil {
			t.Fatalf("%s: the informer never showed the written status: %v", step, err)
		}
	}

	tick("first write", 0, 1)
	charge()
	tick("a charge a second after the last write", time.Second, 1)
	charge()
	tick("another charge a second later", time.Second, 1)
	tick("usage still for an interval", interval, 2)
	// A charge before every tick: written busyIntervals intervals after the
	// last write.
	for i := 1; i < busyIntervals; i++ {
		h.clock.Step(interval)
		charge()
		tick(fmt.Sprintf("burst tick %d", i), 0, 2)
	}
	h.clock.Step(interval)
	charge()
	tick(fmt.Sprintf("burst tick %d", busyIntervals), 0, 3)
	charge()
	tick("the burst's last charge", time.Second, 3)
	tick("usage still after the burst", interval, 4)
	tick("nothing changed", interval, 4)
	// A charge long after the last write is written at the next tick.
	h.clock.Step(busyIntervals * interval)
	charge()
	tick("a charge after a quiet while", time.Second, 5)
	// An event of a tree object (another tree's, or this writer's own
	// update) is not a change of usage: a charge that has been still for an
	// interval is written.
	h.clock.Step(time.Second)
	charge()
	h.clock.Step(interval)
	h.plugin.syncTrees(klog.FromContext(h.ctx))
	tick("a charge still for an interval, after a tree event", 0, 6)
}

// statusWrites counts the tree status updates sent so far.
func (h *harness) statusWrites() int {
	n := 0
	for _, a := range h.trees.Actions() {
		if a.Matches("update", "elasticquotatrees") && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// TestStatusIsWrittenByTheLeaderOnceUsageIsRebuilt: a replica writes tree
// status only while it leads and once its pod and claim handlers have seen
// every object; a standby, or a fresh start, would publish usage without the
// leader's reservations, or near zero.
func TestStatusIsWrittenByTheLeaderOnceUsageIsRebuilt(t *testing.T) {
	h := newHarness(t, world{tree: teamsTree, nodes: []*corev1.Node{node("n1", "32")}})
	h.waitForTree("the tree in force", func(t *elastic.Tree) bool { return t != nil })
	leadership := &Leadership{}
	// The harness's handlers have synced; this plugin's first answer is
	// what the test says.
	podsReady := false
	h.plugin.podsReady = func() bool { return podsReady }
	w := &statusWriter{cache: h.plugin.cache, trees: h.plugin.trees.GetStore(), client: h.trees, interval: time.Second,
		leading: leadership.Leading, synced: h.plugin.usageSynced}
	for _, step := range []struct {
		name            string
		leading, synced bool
		wantWrites      int
	}{
		{"a standby whose usage is rebuilt", false, true, 0},
		{"the leader while its pods are not all seen", true, false, 0},
		{"the leader once its usage is rebuilt", true, true, 1},
	} {
		leadership.SetLeading(step.leading)
		podsReady = step.synced
		h.clock.Step(busyIntervals * time.Second)
		w.tick(h.ctx)
		if got := h.statusWrites(); got != step.wantWrites {
			t.Fatalf("%s: %d status writes, want %d", step.name, got, step.wantWrites)
		}
	}
	// Once rebuilt, usage stays rebuilt: the handlers do not unsync.
	podsReady = false
	if !h.plugin.usageSynced() {
		t.Error("usage is not rebuilt any more after its handlers synced once")
	}
}

// TestLeadership: nothing leads until told.
func TestLeadership(t *testing.T) {
	var none *Leadership
	if none.Leading() {
		t.Error("a nil Leadership leads")
	}
	l := &Leadership{}
	if l.Leading() {
		t.Error("a new Leadership leads")
	}
	l.SetLeading(true)
	if !l.Leading() {
		t.Error("a Leadership told it leads does not")
	}
	l.SetLeading(false)
	if l.Leading() {
		t.Error("a Leadership told it stopped leading still leads")
	}
}

// TestFiguresOnly: a status differing in its figures alone is told from one
// whose conditions or last valid generation changed.
func TestFiguresOnly(t *testing.T) {
	base := schedulingv1beta1.ElasticQuotaTreeStatus{
		ObservedGeneration: 2,
		Conditions:         []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid"}},
		Quotas:             []schedulingv1beta1.QuotaNodeStatus{{Name: "root", Used: cpuList("1")}},
		LastValid:          &schedulingv1beta1.TreeGeneration{Generation: 2},
	}
	for name, tc := range map[string]struct {
		change func(*schedulingv1beta1.ElasticQuotaTreeStatus)
		want   bool
	}{
		"figures":             {func(s *schedulingv1beta1.ElasticQuotaTreeStatus) { s.Quotas[0].Used = cpuList("2") }, true},
		"condition":           {func(s *schedulingv1beta1.ElasticQuotaTreeStatus) { s.Conditions[0].Status = metav1.ConditionFalse }, false},
		"observed generation": {func(s *schedulingv1beta1.ElasticQuotaTreeStatus) { s.ObservedGeneration = 3 }, false},
		"last valid":          {func(s *schedulingv1beta1.ElasticQuotaTreeStatus) { s.LastValid.Generation = 3 }, false},
	} {
		changed := *base.DeepCopy()
		tc.change(&changed)
		if got := figuresOnly(changed, base); got != tc.want {
			t.Errorf("%s changed: figuresOnly = %v, want %v", name, got, tc.want)
		}
	}
}
