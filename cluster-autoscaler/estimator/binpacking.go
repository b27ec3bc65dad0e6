// Package estimator answers "how many new nodes of this shape do these pods
// need?" by packing them onto template copies, first-fit decreasing, with the
// scheduler's own Filter plugins deciding what fits.
package estimator

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
	"github.com/quotascale/quotascale/quota/resources"
)

// Pod is a pending pod with the PreFilter run of its equivalence group, which
// every pod of the group shares. Build it once per loop with NewPod: a loop
// estimates the same pods for every node group.
type Pod struct {
	Pod   *corev1.Pod
	Info  fwk.PodInfo
	Check *simulator.PodCheck
	// Group identifies the pod's equivalence group.
	Group int
	// cpu (millicores) and memory (bytes) requested, for ordering.
	cpu, memory int64
}

// NewPod computes what estimation needs of a pod once.
func NewPod(pod *corev1.Pod, check *simulator.PodCheck, group int) (Pod, error) {
	info, err := framework.NewPodInfo(pod)
	if err != nil {
		return Pod{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	requests := resources.PodRequests(pod)
	return Pod{Pod: pod, Info: info, Check: check, Group: group,
		cpu: requests.Cpu().MilliValue(), memory: requests.Memory().Value()}, nil
}

// Result is an estimate.
type Result struct {
	// NodeCount is how many new nodes the scheduled pods need.
	NodeCount int
	// Scheduled pods land on the new nodes; Unscheduled ones do not fit within
	// the limit (or on the template at all).
	Scheduled   []*corev1.Pod
	Unscheduled []*corev1.Pod
}

// NewNode makes the i-th new node of an estimate from the group's template:
// a copy with a name and kubernetes.io/hostname of its own.
type NewNode func(i int) (fwk.NodeInfo, error)

// Binpack packs pods onto at most limit new nodes, largest pods first, in the
// cluster snapshot (existing and upcoming nodes, and the pods already placed
// there). The new nodes and the pods placed on them are in the snapshot while
// the estimate runs, and every pod's PreFilter state learns of each placement,
// so that inter-pod affinity, anti-affinity and topology spreading hold among
// the pods placed so far, as upstream's estimator has them; the snapshot is
// back as it was when Binpack returns.
//
// A pod of a group that failed on a node is not retried on that node or earlier
// ones when the group's constraints only tighten as nodes fill (resources,
// anti-affinity): the answer would not change. That keeps the estimate linear
// in pods plus nodes rather than their product. After maxDuration (0 is no
// bound) no new node is added, as upstream's
// --max-nodegroup-binpacking-duration: the pods left then go unscheduled.
func Binpack(ctx context.Context, snapshot *simulator.Snapshot, pods []Pod, newNode NewNode, template fwk.NodeInfo, limit int,
	maxDuration time.Duration) (Result, error) {
	start := time.Now()
	ordered := append([]Pod(nil), pods...)
	allocatable := template.Node().Status.Allocatable
	allocCPU, allocMemory := allocatable.Cpu().MilliValue(), allocatable.Memory().Value()
	size := func(p Pod) float64 {
		var s float64
		if allocCPU > 0 {
			s += float64(p.cpu) / float64(allocCPU)
		}
		if allocMemory > 0 {
			s += float64(p.memory) / float64(allocMemory)
		}
		return s
	}
	sort.SliceStable(ordered, func(i, j int) bool { return size(ordered[i]) > size(ordered[j]) })

	snapshot.Fork()
	defer snapshot.Revert()
	checks := map[*simulator.PodCheck]*simulator.PodCheck{}
	var forked []*simulator.PodCheck
	for _, p := range ordered {
		if _, ok := checks[p.Check]; !ok {
			checks[p.Check] = p.Check.Fork()
			forked = append(forked, checks[p.Check])
		}
	}
	// New nodes are at positions first.. of the snapshot; used counts those
	// holding a pod. Only the last can be empty (its pod did not fit after all,
	// as with a zonal spread constraint); it stays for the next pod rather than
	// another being added.
	first := snapshot.Len()
	used := 0
	place := func(p Pod, i int) {
		if i == first+used {
			used++
		}
		node := snapshot.Place(p.Info, i)
		for _, c := range forked {
			c.Placed(ctx, p.Info, node)
		}
	}
	firstTry := map[int]int{}
	var res Result
	for _, p := range ordered {
		check := checks[p.Check]
		placed := false
		from := first
		if check.Monotone() {
			from = max(first, firstTry[p.Group])
		}
		for i := from; i < snapshot.Len(); i++ {
			if check.Fits(ctx, snapshot.At(i)).IsSuccess() {
				place(p, i)
				placed = true
				break
			}
			firstTry[p.Group] = i + 1
		}
		// The scan above tried an empty last node already.
		if !placed && used == snapshot.Len()-first && used < limit && (maxDuration <= 0 || time.Since(start) < maxDuration) {
			fresh, err := newNode(used)
			if err != nil {
				return Result{}, err
			}
			if err := snapshot.AddNode(fresh); err != nil {
				return Result{}, err
			}
			i := snapshot.Len() - 1
			if status := check.Fits(ctx, snapshot.At(i)); status.IsSuccess() {
				place(p, i)
				placed = true
			} else {
				klog.FromContext(ctx).V(5).Info("Pod does not fit an empty template node",
					"pod", klog.KObj(p.Pod), "node", template.Node().Name, "reason", status.Message())
			}
		}
		if placed {
			res.Scheduled = append(res.Scheduled, p.Pod)
		} else {
			res.Unscheduled = append(res.Unscheduled, p.Pod)
		}
	}
	res.NodeCount = used
	return res, nil
}
