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

// Binpack packs pods onto at most limit copies of template, largest pods first.
// A pod of a group that failed on a node is not retried on that node or earlier
// ones: nodes only fill up, so the answer would not change. That keeps the
// estimate linear in pods plus nodes rather than their product. After
// maxDuration (0 is no bound) no new node is added, as upstream's
// --max-nodegroup-binpacking-duration: the pods left then go unscheduled.
func Binpack(ctx context.Context, pods []Pod, template fwk.NodeInfo, limit int, maxDuration time.Duration) Result {
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
	var nodes []fwk.NodeInfo
	firstTry := map[int]int{}
	var res Result
	for _, p := range ordered {
		placed := false
		for i := firstTry[p.Group]; i < len(nodes); i++ {
			if p.Check.Fits(ctx, nodes[i]).IsSuccess() {
				nodes[i].AddPodInfo(p.Info)
				placed = true
				break
			}
			firstTry[p.Group] = i + 1
		}
		if !placed && len(nodes) < limit && (maxDuration <= 0 || time.Since(start) < maxDuration) {
			fresh := template.Snapshot()
			if status := p.Check.Fits(ctx, fresh); status.IsSuccess() {
				fresh.AddPodInfo(p.Info)
				nodes = append(nodes, fresh)
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
	res.NodeCount = len(nodes)
	return res
}
