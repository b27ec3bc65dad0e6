package core

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

// TestRunOnceOnASnapshot: a loop on the benchmark's cluster grows exactly one
// group, and a second loop, with the new nodes still upcoming, grows nothing.
func TestRunOnceOnASnapshot(t *testing.T) {
	f := newLoopFixture(100, 30, 10, 50)
	a := newTestAutoscaler(t, f)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	before := targets(f)
	if err := a.RunOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	grown := 0
	after := targets(f)
	for id, n := range after {
		if n != before[id] {
			grown++
		}
	}
	if grown != 1 {
		t.Fatalf("want exactly one group grown, got %d: before %v after %v", grown, before, after)
	}
	if err := a.RunOnce(ctx, now.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(after, targets(f)); diff != "" {
		t.Errorf("a loop during provisioning changed targets (-first +second):\n%s", diff)
	}
}

func targets(f *loopFixture) map[string]int {
	out := map[string]int{}
	for _, g := range f.provider.groups {
		out[g.id] = g.target
	}
	return out
}

// TestNominatedPodTriggersNothing: a pod nominated to a node waits for the pods
// its preemption evicts; buying it a node would be waste.
func TestNominatedPodTriggersNothing(t *testing.T) {
	f := newLoopFixture(10, 30, 2, 1)
	pods, _ := f.pods.List(labels.Everything())
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			p.Status.NominatedNodeName = "node-0000"
		}
	}
	a := newTestAutoscaler(t, f)
	before := targets(f)
	if err := a.RunOnce(context.Background(), time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, targets(f)); diff != "" {
		t.Errorf("a nominated pod grew a group (-before +after):\n%s", diff)
	}
}
