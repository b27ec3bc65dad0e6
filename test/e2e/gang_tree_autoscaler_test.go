package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotascale/quotascale/processors/status"
)

// TestGangAutoscalerPastMinCountUnderElasticQuota: an ACK gang of ten pods of
// 3 cpu with min-available 2, in a leaf of max 6 cpu, over a group of 4-cpu
// nodes. The tree admits the gang for its first two members and refuses
// every member past them alone: the autoscaler adds the two nodes the two
// admitted pods need and no more, the other eight stay pending for the
// leaf's reason, and the autoscaler reports each of them refused by the tree
// as a pod, not as the gang.
func TestGangAutoscalerPastMinCountUnderElasticQuota(t *testing.T) {
	const (
		leaf  = "gang-team" // gangTreeManifest's leaf for ns
		group = "e2e-kwok-4cpu"
	)
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyTree(t, ctx, gangTreeManifest(ns, "6", "6", ""))
	a := startAutoscaler(t, ctx, fourCPUGroup, nil)
	createGangPods(t, ctx, ns, "train", 10, "3", nil, withACKLabels("train", 2))
	waitUnschedulable(t, ctx, ns, 10)

	atMostTwo := func() error {
		if got := a.targets(t)[group]; got > 2 {
			return fmt.Errorf("group %s grew to %d nodes for a gang whose tree admits 2 pods", group, got)
		}
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := a.RunOnce(ctx); err != nil {
			return false, err
		}
		if err := atMostTwo(); err != nil {
			return false, err
		}
		return wantPhases(ns, 2, 8)(ctx) == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for 2 pods of the gang running and 8 pending: %v (targets %v)", err, a.targets(t))
	}
	settle(t, ctx, "2 running, 8 pending", wantPhases(ns, 2, 8))
	for i := 0; i < 2; i++ {
		a.loop(t, ctx)
	}
	if diff := cmp.Diff(map[string]int{group: 2}, a.targets(t)); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}

	pending := pendingPods(t, ctx, ns)
	leafRefusal := fmt.Sprintf("exceeded elastic quota %q", leaf)
	waitFor(t, ctx, "the pending pods told the leaf refuses them", func(ctx context.Context) error {
		return scheduledConditionsSay(ctx, ns, pending, leafRefusal)
	})
	reason := fmt.Sprintf(`exceeded elastic quota: "ElasticQuotaTree/%s", resources: cpu`, leaf)
	for _, name := range pending {
		waitFor(t, ctx, "the autoscaler's event on "+name, func(ctx context.Context) error {
			return hasPodEventOn(ctx, ns, name, "pod didn't trigger scale-up: "+reason)
		})
	}
	refusals := visibilityRefusals(t, a.opts.VisibilityLogFile, ns)
	for _, name := range pending {
		got, ok := refusals[name]
		if !ok {
			t.Errorf("the visibility log names no refusal of pod %s", name)
			continue
		}
		if got.gang != nil || got.reason != reason {
			t.Errorf("pod %s refused in the visibility log with reason %q and gang %+v; want %q by the tree, not as a gang", name, got.reason, got.gang, reason)
		}
	}
}

// scheduledConditionsSay checks that each named pod of ns is marked
// Unschedulable with a message containing want.
func scheduledConditionsSay(ctx context.Context, ns string, names []string, want string) error {
	for _, name := range names {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var msg string
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				msg = c.Message
			}
		}
		if !strings.Contains(msg, want) {
			return fmt.Errorf("pod %s unschedulable with %q, want a message containing %q", name, msg, want)
		}
	}
	return nil
}

// hasPodEventOn finds a NotTriggerScaleUp event with message on pod ns/name.
func hasPodEventOn(ctx context.Context, ns, name, message string) error {
	msgs, err := podEvents(ctx, ns, "NotTriggerScaleUp")
	if err != nil {
		return err
	}
	if slices.Contains(msgs, name+": "+message) {
		return nil
	}
	return fmt.Errorf("events %q", msgs)
}

// podRefusal is the last refusal of a pod before any node group, as the
// visibility log names it.
type podRefusal struct {
	reason string
	gang   *status.GangRef
}

// visibilityRefusals reads the pods of ns refused before any node group from
// the visibility log at path, by pod name, with their last refusal.
func visibilityRefusals(t *testing.T, path, ns string) map[string]podRefusal {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]podRefusal{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e status.Entry
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("visibility log line is not JSON: %v", err)
		}
		if e.NoDecisionStatus == nil || e.NoDecisionStatus.NoScaleUp == nil {
			continue
		}
		for _, g := range e.NoDecisionStatus.NoScaleUp.UnhandledPodGroups {
			if g.PodRefusal == nil || g.PodGroup.SamplePod.Namespace != ns || len(g.PodRefusal.Parameters) == 0 {
				continue
			}
			out[g.PodGroup.SamplePod.Name] = podRefusal{reason: g.PodRefusal.Parameters[0], gang: g.Gang}
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
