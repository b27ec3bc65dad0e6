package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// deviceTree is flatTree with a device max of 8 per leaf.
func deviceTree(quotas int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spec:\n  root:\n    name: root\n    min: {cpu: %d}\n    max: {cpu: %d}\n    children:\n", 100*quotas, 100*quotas)
	for i := range quotas {
		fmt.Fprintf(&b, "    - {name: q-%d, namespaces: [ns-%d], min: {cpu: 50}, max: {cpu: 100, %q: 8}}\n", i, i, gpuDevices)
	}
	return b.String()
}

// BenchmarkPreFilterClaim is PreFilter for a pending pod with one claim (one
// device, not allocated yet, named directly) at 10, 100 and 1,000 quotas with
// 20 bound pods each, as the scheduler retries it: the claim is read from the
// informer and charged by quota/claims' rule at every attempt.
func BenchmarkPreFilterClaim(b *testing.B) {
	for _, quotas := range []int{10, 100, 1000} {
		var pods []*corev1.Pod
		dra := []runtime.Object{gpuClass()}
		for q := range quotas {
			ns := fmt.Sprintf("ns-%d", q)
			for i := range 20 {
				pods = append(pods, testPod(fmt.Sprintf("bound-%d-%d", q, i), ns, "1", "n1", low, 0))
			}
			dra = append(dra, gpuClaim(ns, "gpu", "gpu.example.com", 1))
		}
		h := newHarness(b, world{tree: deviceTree(quotas), nodes: []*corev1.Node{node("n1", fmt.Sprint(100*quotas))}, pods: pods, dra: dra})
		h.plugin.cache.exportMetrics()
		pending := make([]*corev1.Pod, quotas)
		for q := range pending {
			pending[q] = withClaim(testPod(fmt.Sprintf("pending-%d", q), fmt.Sprintf("ns-%d", q), "1", "", high, 0), "gpu")
		}
		state := framework.NewCycleState()
		b.Run(fmt.Sprintf("quotas=%d", quotas), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, status := h.plugin.PreFilter(h.ctx, state, pending[i%quotas], nil); status.Code() != fwk.Skip {
					b.Fatalf("PreFilter = %v, want admitted (Skip)", status)
				}
				i++
			}
		})
	}
}
