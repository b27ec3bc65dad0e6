package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
//     a pending pod with the same object.
//   - attempt=first: a new pod object whose informer event the plugin has
//     handled, as for a pod the scheduler tries for the first time: its
//     requests were computed on delivery (event=pending measures that).
//   - attempt=first-before-event: a new pod object the plugin's handler has not
//     seen yet (the scheduler's queue got it first), so PreFilter computes the
//     requests itself; the struct copy is counted in the figures.
//   - event=pending: the plugin's informer handler for a new pending pod
//     object, on the informer's goroutine rather than the scheduling cycle.
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
		preFilter := func(b *testing.B, state fwk.CycleState, pod *corev1.Pod) {
			if _, status := h.plugin.PreFilter(h.ctx, state, pod, nil); status.Code() != fwk.Skip {
				b.Fatalf("PreFilter = %v, want admitted (Skip)", status)
			}
		}
		// fresh are new objects of distinct pods, made and forgotten outside
		// the timer, a batch at a time.
		const batch = 1024
		fresh := make([]*corev1.Pod, batch)
		renew := func(iteration int) {
			for j := range fresh {
				if fresh[j] != nil {
					h.plugin.cache.deletePod(fresh[j])
				}
				copied := *pending[(iteration+j)%quotas]
				copied.UID = types.UID(fmt.Sprintf("%s-%d", copied.UID, j))
				fresh[j] = &copied
				h.plugin.onPod(fresh[j])
			}
		}

		loop := func(b *testing.B, body func(i int)) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				body(i)
				i++
			}
		}
		state := framework.NewCycleState()
		b.Run(fmt.Sprintf("quotas=%d/attempt=retry", quotas), func(b *testing.B) {
			loop(b, func(i int) { preFilter(b, state, pending[i%quotas]) })
		})
		b.Run(fmt.Sprintf("quotas=%d/attempt=first", quotas), func(b *testing.B) {
			loop(b, func(i int) {
				if i%batch == 0 {
					b.StopTimer()
					renew(i)
					b.StartTimer()
				}
				preFilter(b, state, fresh[i%batch])
			})
		})
		b.Run(fmt.Sprintf("quotas=%d/attempt=first-before-event", quotas), func(b *testing.B) {
			loop(b, func(i int) {
				copied := *pending[i%quotas]
				preFilter(b, state, &copied)
			})
		})
		b.Run(fmt.Sprintf("quotas=%d/event=pending", quotas), func(b *testing.B) {
			loop(b, func(i int) {
				copied := *pending[i%quotas]
				h.plugin.onPod(&copied)
			})
		})
	}
}

// BenchmarkPreFilterGang is PreFilter for a pod of a gang of 8 (ACK's labels)
// at 1,000 flat quotas with 20 bound pods each, metrics on.
//
//   - attempt=whole: no member is reserved yet, so the pod asks for the whole
//     gang: the gang's members are read from the plugin's index, ordered, and
//     their requests summed and admitted.
//   - attempt=in-reservation: another member holds the gang's reservation,
//     and the pod is admitted into it.
func BenchmarkPreFilterGang(b *testing.B) {
	const quotas, size = 1000, 8
	var pods []*corev1.Pod
	for q := range quotas {
		for i := range 20 {
			pods = append(pods, testPod(fmt.Sprintf("bound-%d-%d", q, i), fmt.Sprintf("ns-%d", q), "1", "n1", low, 0))
		}
	}
	members := ackGang("ns-7", "job", fmt.Sprint(size), size, "2")
	h := newHarness(b, world{tree: flatTree(quotas), nodes: []*corev1.Node{node("n1", fmt.Sprint(100*quotas))}, pods: append(pods, members...)})
	h.plugin.cache.exportMetrics()
	state := framework.NewCycleState()
	preFilter := func(b *testing.B, pod *corev1.Pod) {
		if _, status := h.plugin.PreFilter(h.ctx, state, pod, nil); status.Code() != fwk.Skip {
			b.Fatalf("PreFilter(%s) = %v, want admitted (Skip)", pod.Name, status)
		}
	}
	run := func(b *testing.B, pod *corev1.Pod) {
		b.ReportAllocs()
		for b.Loop() {
			preFilter(b, pod)
		}
	}
	b.Run(fmt.Sprintf("quotas=%d/gang=%d/attempt=whole", quotas, size), func(b *testing.B) { run(b, members[1]) })
	if _, status := h.reserve(members[0]); !status.IsSuccess() {
		b.Fatalf("reserving the first member: %v", status)
	}
	b.Run(fmt.Sprintf("quotas=%d/gang=%d/attempt=in-reservation", quotas, size), func(b *testing.B) { run(b, members[1]) })
}
