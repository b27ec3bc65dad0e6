package capacityscheduling

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
//     requests were computed on delivery. ns/op is PreFilter alone, the
//     scheduling cycle's share; beside it, per pod, reserve-ns/pod is the
//     plugin's Reserve (also on the cycle), informer-ns/pod the plugin's
//     handlers on the informer's goroutine for the pod's add (pending) and
//     for its update once bound (the binding the scheduler's assume led to),
//     and whole-ns/pod all of it: moving work off the cycle shows there.
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
			l := &lives{h: h, pending: pending, batch: min(1024, 30*quotas)}
			n := 0
			loop(b, func(i int) {
				if i%l.batch == 0 {
					b.StopTimer()
					l.next(b, i)
					b.StartTimer()
				}
				preFilter(b, l.states[i%l.batch], l.fresh[i%l.batch])
				l.tried++
				n++
			})
			l.end(b)
			pods := float64(n)
			cycle := float64(b.Elapsed().Nanoseconds()) / pods
			reserve := float64(l.reserve.Nanoseconds()) / pods
			informer := float64(l.added.Nanoseconds())/float64(l.made) + float64(l.bound.Nanoseconds())/pods
			b.ReportMetric(reserve, "reserve-ns/pod")
			b.ReportMetric(informer, "informer-ns/pod")
			b.ReportMetric(cycle+reserve+informer, "whole-ns/pod")
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
				h.plugin.onPod(nil, &copied)
			})
		})
	}
}

// lives takes batches of new pods through the plugin as the scheduler and its
// informer would, timing apart what is not PreFilter: each pod's add event
// (pending) before its first attempt, and after the attempts its Reserve and
// its update event once bound. Each batch fits the tree (30 pods a quota at
// most), and is deleted untimed before the next.
type lives struct {
	h       *harness
	pending []*corev1.Pod
	batch   int
	// fresh are the batch's pods and states their cycle states; tried is how
	// many of them PreFilter has seen.
	fresh  []*corev1.Pod
	states []fwk.CycleState
	tried  int
	// reserve, added and bound are the time spent in Reserve and in the pod
	// handlers for the adds and for the bound updates, over every batch; made
	// counts the pods added.
	reserve, added, bound time.Duration
	made                  int
}

// next finishes the batch in flight and starts a new one.
func (l *lives) next(b *testing.B, iteration int) {
	l.end(b)
	for j := range l.batch {
		copied := *l.pending[(iteration+j)%len(l.pending)]
		copied.UID = types.UID(fmt.Sprintf("%s-%d", copied.UID, l.made))
		l.made++
		l.fresh = append(l.fresh, &copied)
		l.states = append(l.states, framework.NewCycleState())
	}
	start := time.Now()
	for _, p := range l.fresh {
		l.h.plugin.onPod(nil, p)
	}
	l.added += time.Since(start)
}

// end finishes the batch in flight and deletes its pods, so that the tree
// holds only the bound pods it started with: -count runs the benchmark again
// on the same harness.
func (l *lives) end(b *testing.B) {
	l.finish(b)
	for _, p := range l.fresh {
		l.h.plugin.cache.deletePod(p)
	}
	l.fresh, l.states, l.tried = l.fresh[:0], l.states[:0], 0
}

// finish reserves the pods PreFilter saw, then delivers each one's update as
// bound: the scheduler's binding, written by the API server.
func (l *lives) finish(b *testing.B) {
	tried := l.fresh[:l.tried]
	start := time.Now()
	for j, p := range tried {
		if status := l.h.plugin.Reserve(l.h.ctx, l.states[j], p, "n1"); !status.IsSuccess() {
			b.Fatalf("Reserve(%s) = %v", p.Name, status)
		}
	}
	l.reserve += time.Since(start)
	bound := make([]*corev1.Pod, len(tried))
	for j, p := range tried {
		copied := *p
		copied.Spec.NodeName = "n1"
		copied.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		bound[j] = &copied
	}
	start = time.Now()
	for j, p := range tried {
		l.h.plugin.onPod(p, bound[j])
	}
	l.bound += time.Since(start)
	copy(l.fresh, bound)
	l.tried = 0
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
