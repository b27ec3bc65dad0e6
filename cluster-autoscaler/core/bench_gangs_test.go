package core

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/quota/gang"
)

// BenchmarkRunOnceGangs is one loop with 100 pending gangs of 8 pods (ACK's
// labels) over 1,000 nodes of 100 groups, issue 27's bound being 2 s: each
// gang is estimated whole for every group that takes it.
func BenchmarkRunOnceGangs(b *testing.B) {
	const nodes, podsPerNode, groups, gangs, size = 1000, 30, 100, 100, 8
	b.Run(fmt.Sprintf("nodes=%d/groups=%d/gangs=%d/size=%d", nodes, groups, gangs, size), func(b *testing.B) {
		f := newLoopFixture(nodes, podsPerNode, groups, 0)
		all, _ := f.pods.List(labels.Everything())
		podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, p := range all {
			_ = podIdx.Add(p)
		}
		for g := 0; g < gangs; g++ {
			for i := 0; i < size; i++ {
				p := testPod(fmt.Sprintf("ns-%d", g%50), fmt.Sprintf("gang-%d-%d", g, i), fmt.Sprintf("job-%d", g), "1", "")
				p.Labels = map[string]string{gang.LabelName: fmt.Sprintf("gang-%d", g), gang.LabelMinAvailable: fmt.Sprint(size)}
				_ = podIdx.Add(p)
			}
		}
		f.pods = corev1listers.NewPodLister(podIdx)
		benchLoops(b, f)
	})
}
