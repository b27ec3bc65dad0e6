package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// flatTree is a root over quotas flat leaves of 100 cpu each, one namespace
// per leaf (ns-0, ns-1, ...), as issue 19 measured scheduler-plugins'
// CapacityScheduling.
func flatTree(quotas int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spec:\n  root:\n    name: root\n    min: {cpu: %d}\n    max: {cpu: %d}\n    children:\n", 100*quotas, 100*quotas)
	for i := range quotas {
		fmt.Fprintf(&b, "    - {name: q-%d, namespaces: [ns-%d], min: {cpu: 50}, max: {cpu: 100}}\n", i, i)
	}
	return b.String()
}

// BenchmarkPreFilter is the plugin's PreFilter for one pod of a governed
// namespace, at 10, 100 and 1,000 flat quotas with 20 bound pods each, with
// metrics on as in the scheduler. The pods' requests have init containers and
// overhead, as component-helpers' PodRequests must see them.
//
//   - attempt=retry: a pod PreFilter has seen before, as the scheduler retries
//     a pending pod with the same object: the requests come from the cache.
//   - attempt=first: a new pod object every time (a struct copy, counted in the
//     figures), so the requests are computed.
func BenchmarkPreFilter(b *testing.B) {
	for _, quotas := range []int{10, 100, 1000} {
		var pods []*corev1.Pod
		for q := range quotas {
			for i := range 20 {
				pods = append(pods, testPod(fmt.Sprintf("bound-%d-%d", q, i), fmt.Sprintf("ns-%d", q), "1", "n1", low, 0))
			}
		}
		h := newHarness(b, world{tree: flatTree(quotas), nodes: []*corev1.Node{node("n1", fmt.Sprint(100*quotas))}, pods: pods})
		h.plugin.cache.exportMetrics()
		pending := make([]*corev1.Pod, quotas)
		for q := range pending {
			p := testPod(fmt.Sprintf("pending-%d", q), fmt.Sprintf("ns-%d", q), "1", "", high, 0)
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: cpuList("2")}}}
			p.Spec.Overhead = cpuList("100m")
			pending[q] = p
		}
		run := func(b *testing.B, next func(i int) *corev1.Pod) {
			state := framework.NewCycleState()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, status := h.plugin.PreFilter(h.ctx, state, next(i), nil); status.Code() != fwk.Skip {
					b.Fatalf("PreFilter = %v, want admitted (Skip)", status)
				}
				i++
			}
		}
		b.Run(fmt.Sprintf("quotas=%d/attempt=retry", quotas), func(b *testing.B) {
			run(b, func(i int) *corev1.Pod { return pending[i%quotas] })
		})
		b.Run(fmt.Sprintf("quotas=%d/attempt=first", quotas), func(b *testing.B) {
			run(b, func(i int) *corev1.Pod {
				copied := *pending[i%quotas]
				return &copied
			})
		})
	}
}
