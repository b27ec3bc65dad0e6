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
	resourcev1 "k8s.io/api/resource/v1"
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
	// Gangs are BinpackGangs' outcome for each gang, in its order.
	Gangs []GangResult
	// TimedOut: maxDuration ran out and kept a node from being added, so
	// the estimate depends on how fast it ran.
	TimedOut bool
}

// NewNode makes the i-th new node of an estimate from the group's template:
// a copy with a name and kubernetes.io/hostname of its own, and the copies of
// the template's ResourceSlices that make its devices its own.
type NewNode func(i int) (fwk.NodeInfo, []*resourcev1.ResourceSlice, error)

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
	return BinpackGangs(ctx, snapshot, pods, nil, newNode, template, limit, maxDuration)
}

// packer is one estimate's state: the new nodes added so far and the pods'
// PreFilter states, forked from the loop's.
type packer struct {
	snapshot *simulator.Snapshot
	newNode  NewNode
	template fwk.NodeInfo
	limit    int
	// deadline is when no new node may be added any more; zero is never.
	deadline time.Time
	// checks are the estimate's forks of the loop's checks, forked lists
	// the loop's checks in the order they were forked; following are the
	// forks a placement can change, for each placement to reach (telling
	// every check of every placement would cost placements x pod groups
	// for nothing), and followingOf the loop's checks they fork.
	// antiAffinity says whether a pod to place has required anti-affinity
	// terms.
	checks       map[*simulator.PodCheck]*simulator.PodCheck
	forked       []*simulator.PodCheck
	following    []*simulator.PodCheck
	followingOf  []*simulator.PodCheck
	antiAffinity bool
	// New nodes are at positions first.. of the snapshot; used counts those
	// holding a pod. Only the last can be empty (its pod did not fit after all,
	// as with a zonal spread constraint); it stays for the next pod rather than
	// another being added.
	first, used int
	// firstTry is, per equivalence group whose constraints only tighten,
	// the first new node worth trying. firstTryWas is, during a gang's
	// trial, what each entry the trial changed was before it.
	firstTry    map[int]int
	firstTryWas map[int]int
	// timedOut: the deadline kept a node from being added.
	timedOut bool
}

func newPacker(snapshot *simulator.Snapshot, newNode NewNode, template fwk.NodeInfo, limit int, maxDuration time.Duration) *packer {
	k := &packer{snapshot: snapshot, newNode: newNode, template: template, limit: limit,
		checks: map[*simulator.PodCheck]*simulator.PodCheck{}, first: snapshot.Len(), firstTry: map[int]int{}}
	if maxDuration > 0 {
		k.deadline = time.Now().Add(maxDuration)
	}
	return k
}

// fork adds the estimate's own copy of each check the pods use.
func (k *packer) fork(pods []Pod) {
	for _, p := range pods {
		k.antiAffinity = k.antiAffinity || len(p.Info.GetRequiredAntiAffinityTerms()) > 0
		if _, ok := k.checks[p.Check]; !ok {
			k.checks[p.Check] = p.Check.Fork()
			k.forked = append(k.forked, p.Check)
		}
	}
	k.following, k.followingOf = k.following[:0], k.followingOf[:0]
	for _, orig := range k.forked {
		if c := k.checks[orig]; c.FollowsPlacements(k.antiAffinity) {
			k.following = append(k.following, c)
			k.followingOf = append(k.followingOf, orig)
		}
	}
}

// bySize orders pods largest first, measured against the template's
// allocatable cpu and memory, keeping the given order among equals.
func (k *packer) bySize(pods []Pod) []Pod {
	ordered := append([]Pod(nil), pods...)
	allocatable := k.template.Node().Status.Allocatable
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
	return ordered
}

// place puts p on the first new node that takes it, adding a node when none
// does and the limit and the deadline allow; it reports whether p was placed.
func (k *packer) place(ctx context.Context, p Pod) (bool, error) {
	check := k.checks[p.Check]
	from := k.first
	if check.Monotone() {
		from = max(k.first, k.firstTry[p.Group])
	}
	for i := from; i < k.snapshot.Len(); i++ {
		if check.Fits(ctx, k.snapshot.At(i)).IsSuccess() {
			return true, k.put(ctx, p, i)
		}
		k.setFirstTry(p.Group, i+1)
	}
	// The scan above tried an empty last node already.
	if k.used != k.snapshot.Len()-k.first || k.used >= k.limit {
		return false, nil
	}
	if !k.deadline.IsZero() && time.Now().After(k.deadline) {
		k.timedOut = true
		return false, nil
	}
	fresh, slices, err := k.newNode(k.used)
	if err != nil {
		return false, err
	}
	if err := k.snapshot.AddNode(fresh, slices...); err != nil {
		return false, err
	}
	i := k.snapshot.Len() - 1
	if status := check.Fits(ctx, k.snapshot.At(i)); !status.IsSuccess() {
		klog.FromContext(ctx).V(5).Info("Pod does not fit an empty template node",
			"pod", klog.KObj(p.Pod), "node", k.template.Node().Name, "reason", status.Message())
		return false, nil
	}
	return true, k.put(ctx, p, i)
}

// put places p on the node at i, which its check just passed it for: the
// node holds it, its claims take their devices, and the checks that follow
// placements learn of it.
func (k *packer) put(ctx context.Context, p Pod, i int) error {
	if i == k.first+k.used {
		k.used++
	}
	node := k.snapshot.Place(p.Info, i)
	if err := k.checks[p.Check].Reserve(ctx, p.Pod, node); err != nil {
		return err
	}
	for _, c := range k.following {
		c.Placed(ctx, p.Info, node)
	}
	return nil
}
