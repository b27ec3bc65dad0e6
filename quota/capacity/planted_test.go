package capacity

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/test/oracle"
)

// TestOracleCatchesPlantedBug drives the scale-up check as the autoscaler
// does (ask what a group may grow by, count what it asked for as upcoming,
// register the nodes later) and lets test/oracle, which shares no code with
// this package, judge the nodes that result. Built as is, the nodes fill the
// quota and the oracle finds nothing; built with -tags quotascale_plantedbug,
// the upcoming count is one short (planted_bug.go) and the oracle must report
// the overshoot.
func TestOracleCatchesPlantedBug(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	q := capacityQuota("pool-a", matchLabels("pool", "a"), limits("nodes", "3", "cpu", "12"))
	q.UID, q.CreationTimestamp = "uid-pool-a", metav1.NewTime(created)
	set := Build([]*autoscalingv1beta1.CapacityQuota{q}, Options{})
	judge := oracle.New()
	judge.SetCapacityQuota(q)

	const group = "pool-a-group"
	labels := map[string]string{"pool": "a"}
	template := node("template", labels, coreList("cpu", "4"))
	// Three loops while no node registers: the pending pods keep asking for
	// three more nodes each time.
	target := 0
	for range 3 {
		allowed, _ := set.AllowedDeltaFor(group, template, 3)
		target += allowed
		set.SetUpcoming(group, target, template)
	}
	for i := range target {
		n := node(fmt.Sprintf("pool-a-%d", i), labels, coreList("cpu", "4"))
		n.CreationTimestamp = metav1.NewTime(created.Add(time.Minute + time.Duration(i)*time.Second))
		set.AddNode(n)
		set.SetUpcoming(group, target-i-1, template)
		judge.SetNode(n)
	}

	violations := judge.Violations(func(*corev1.Pod) (types.UID, error) { return "", fmt.Errorf("no pod was preempted") })
	t.Logf("target %d; the oracle's violations: %q", target, violations)
	if plantedUpcomingMiss == 0 {
		if target != 3 || len(violations) > 0 {
			t.Errorf("the real check grew the group to %d nodes of 3, and the oracle reports %q", target, violations)
		}
		return
	}
	if len(violations) == 0 {
		t.Errorf("the oracle missed the planted off-by-one in the upcoming count (the group grew to %d nodes of 3)", target)
	}
}
