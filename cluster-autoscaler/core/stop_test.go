package core

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestNoResizeOnceTheLoopIsToldToStop: a loop whose replica stopped leading
// (its context ended) while it decided a scale-up does not resize the group:
// the next leader may already be adding nodes for the same pods.
func TestNoResizeOnceTheLoopIsToldToStop(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		group := &fakeGroup{id: "pool", max: 10, template: node("template-pool", "pool", "4", "16Gi")}
		f := &loopFixture{provider: &fakeProvider{groups: []*fakeGroup{group}}}
		podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, p := range []*corev1.Pod{testPod("ns", "a", "job", "3500m", ""), testPod("ns", "b", "job", "3500m", "")} {
			_ = podIdx.Add(p)
		}
		f.nodes = corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
		f.pods = corelisters.NewPodLister(podIdx)
		a := newTestAutoscaler(t, f)
		ctx, cancel := context.WithCancel(context.Background())
		if stopped {
			cancel()
		}
		// The loop's own error is not what this judges: a stopped loop may
		// report that it did not resize.
		_ = a.RunOnce(ctx, time.Unix(1000, 0))
		cancel()
		want := 1
		if stopped {
			want = 0
		}
		if group.increased != want {
			t.Errorf("context ended %v: %d IncreaseSize calls, want %d", stopped, group.increased, want)
		}
	}
}
