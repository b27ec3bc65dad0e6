package oracle

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// No node is added for pods their tree refuses. The objects show which pods
// a scale-up was for (the autoscaler's TriggeredScaleUp event on each of
// them), but not the moment of the autoscaler's snapshot, nor its view of the
// tree's usage: a refusal that depends on what else is charged may have been
// lifted at that moment, and pods bound, deleted or relabelled since. Nor
// does an event arrive in order with the pod's updates: the autoscaler may
// have seen a label removed that the oracle has not seen yet. So the oracle
// judges the reports at the verdict, on all it has seen of each pod by then,
// and only refusals that no usage lifts, under every tree in force from the
// pod's first sight to the verdict:
//
//   - the pod's own requests exceed a max on its leaf's path;
//   - the pod is a gang member, under every gang it was ever seen in, and
//     each such gang's size smallest members ever seen (whichever of them the
//     autoscaler saw, its whole is at least that) exceed a max on the path.
//
// Only pods of default-scheduler are judged: it is the scheduler that
// enforces the tree in the clusters the oracle watches, and a tree holds back
// only the pods of the schedulers the autoscaler is told enforce it.
//
// What it does not judge, and why:
//
//   - Refusals by usage (a leaf full of other pods): the usage the autoscaler
//     saw is not in the objects, and the soak deletes and binds pods all the
//     time.
//   - Gang members past the gang's size that the tree refuses once the size
//     is admitted: which members one scale-up was for cannot be told apart
//     from the ones of another loop (events are per pod and aggregated), and
//     the members bound when the autoscaler looked are not recorded.
//   - Gangs with fewer live pods than their size: their controller may be
//     creating the rest while the autoscaler looks.
//   - Nodes added and left empty: pods deleted or placed elsewhere meanwhile
//     explain an empty node as well as a wrong scale-up does.
//   - Device limits: a claim shared with a bound pod asks nothing more, and
//     the allocation the autoscaler simulated is not in the objects.

// seenPod is what the oracle keeps of every pod ever seen: what judging a
// preemptor or a scale-up needs of it.
type seenPod struct {
	namespace string
	priority  int32
	scheduler string
	// requests are the smallest requests the pod was seen with.
	requests corev1.ResourceList
	// gangs are the gangs the pod was seen in; alone is set when it was
	// also seen in none.
	gangs []gangRef
	alone bool
	// epoch is the entry of treeHistory in force when the pod was first
	// seen, -1 when none was recorded yet.
	epoch int
}

// treeScheduled says the pod is default-scheduler's.
func (p seenPod) treeScheduled() bool {
	return p.scheduler == "" || p.scheduler == corev1.DefaultSchedulerName
}

// seePodLocked records pod in seenPods and its requests among its gang's.
func (o *Oracle) seePodLocked(pod *corev1.Pod) {
	seen, ok := o.seenPods[pod.UID]
	requests := podRequests(pod)
	if !ok {
		seen = seenPod{namespace: pod.Namespace, requests: requests, epoch: len(o.treeHistory) - 1}
	}
	seen.priority, seen.scheduler = priority(pod), pod.Spec.SchedulerName
	seen.requests = smaller(seen.requests, requests)
	ref, size, sized := o.gangOfLocked(pod)
	named := sized || ref.kind == "PodGroup"
	if sized && ref.kind == "labels" {
		if known, ok := o.ackSizes[ref]; !ok || size < known {
			o.ackSizes[ref] = size
		}
	}
	switch {
	case !named:
		seen.alone = true
	case !slices.Contains(seen.gangs, ref):
		seen.gangs = append(seen.gangs, ref)
	}
	if named {
		members := o.gangRequests[ref]
		if members == nil {
			members = map[types.UID]corev1.ResourceList{}
			o.gangRequests[ref] = members
		}
		members[pod.UID] = smaller(members[pod.UID], requests)
	}
	o.seenPods[pod.UID] = seen
}

// noteTreeLocked appends the tree in force to treeHistory when it changed; a
// generation being judged is a moment of no known tree.
func (o *Oracle) noteTreeLocked() {
	current := o.inForce
	if o.pending {
		current = nil
	}
	if n := len(o.treeHistory); n == 0 || o.treeHistory[n-1] != current {
		o.treeHistory = append(o.treeHistory, current)
	}
}

// scaleUpReport is a scale-up the autoscaler reported for a pod.
type scaleUpReport struct {
	uid           types.UID
	name, message string
}

// ScaleUpTriggered records that the autoscaler reported a scale-up for the
// pod of uid (its TriggeredScaleUp event, whose message names the groups),
// to be judged at the verdict: a pod its tree refuses whatever else is
// charged triggers none. Reports for pods of a tree's namespaces count as
// judged.
func (o *Oracle) ScaleUpTriggered(uid types.UID, name, message string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := scaleUpReport{uid: uid, name: name, message: message}
	if slices.Contains(o.scaleUps, r) {
		return // the event's count went up
	}
	o.scaleUps = append(o.scaleUps, r)
	if seen, ok := o.seenPods[uid]; ok && o.inForce != nil && seen.treeScheduled() {
		if _, governed := o.inForce.leafOf[seen.namespace]; governed {
			o.counts.ScaleUpsJudged++
		}
	}
}

// refusedScaleUpsLocked judges the scale-ups reported, each once.
func (o *Oracle) refusedScaleUpsLocked() []string {
	var out []string
	for _, r := range o.scaleUps {
		if msg := o.judgeScaleUpLocked(r); msg != "" && !slices.Contains(out, msg) {
			out = append(out, msg)
		}
	}
	return out
}

// judgeScaleUpLocked is the violation r is, "" when it is none.
func (o *Oracle) judgeScaleUpLocked(r scaleUpReport) string {
	seen, ok := o.seenPods[r.uid]
	if !ok || seen.epoch < 0 || !seen.treeScheduled() {
		return ""
	}
	trees := o.treeHistory[seen.epoch:]
	if slices.Contains(trees, nil) {
		return ""
	}
	var why string
	for _, t := range trees {
		if why = o.alwaysRefusedLocked(t, seen); why == "" {
			return ""
		}
	}
	return fmt.Sprintf("pod %s/%s triggered a scale-up (%s), though %s refuses it whatever else is charged: %s",
		seen.namespace, r.name, r.message, trees[len(trees)-1].object, why)
}

// alwaysRefusedLocked says why t refuses seen's pod with nothing else
// charged, or "" when it may admit it.
func (o *Oracle) alwaysRefusedLocked(t *quotaTree, seen seenPod) string {
	leaf, governed := t.leafOf[seen.namespace]
	if !governed {
		return ""
	}
	if over := overMax(t, leaf, seen.requests); over != "" {
		return "it requests " + over
	}
	if seen.alone || len(seen.gangs) == 0 {
		return ""
	}
	var whys []string
	for _, ref := range seen.gangs {
		size, known := o.gangSizeLocked(ref)
		members := slices.Collect(maps.Values(o.gangRequests[ref]))
		if !known || len(members) < size {
			return ""
		}
		over := overMax(t, leaf, smallestSum(members, size))
		if over == "" {
			return ""
		}
		whys = append(whys, fmt.Sprintf("gang %s's %d smallest members request %s", ref, size, over))
	}
	return strings.Join(whys, "; ")
}

// gangSizeLocked is how many members gang ref needs: its PodGroup's
// minCount, or the smallest min-available its members were seen with.
func (o *Oracle) gangSizeLocked(ref gangRef) (int, bool) {
	if ref.kind == "PodGroup" {
		size, ok := o.podGroups[ref.namespace+"/"+ref.name]
		return int(size), ok
	}
	size, ok := o.ackSizes[ref]
	return size, ok
}

// overMax names the first resource of requests over a max on leaf's path,
// "" when none is.
func overMax(t *quotaTree, leaf int, requests corev1.ResourceList) string {
	for n := leaf; n >= 0; n = t.nodes[n].parent {
		for _, name := range requested(requests) {
			q := requests[name]
			if max, limited := t.nodes[n].max[name]; limited && q.Cmp(max) > 0 {
				return fmt.Sprintf("%s %s, over the max %s of %q", name, q.String(), max.String(), t.nodes[n].name)
			}
		}
	}
	return ""
}

// smallestSum is, for each resource, the sum of the size smallest amounts
// among members: the least any size of them ask together.
func smallestSum(members []corev1.ResourceList, size int) corev1.ResourceList {
	all := corev1.ResourceList{}
	for _, m := range members {
		for name, q := range m {
			addQuantity(all, name, q)
		}
	}
	out := corev1.ResourceList{}
	for _, name := range requested(all) {
		amounts := make([]resource.Quantity, 0, len(members))
		for _, m := range members {
			amounts = append(amounts, m[name])
		}
		slices.SortFunc(amounts, func(a, b resource.Quantity) int { return a.Cmp(b) })
		var sum resource.Quantity
		for _, q := range amounts[:min(size, len(amounts))] {
			sum.Add(q)
		}
		out[name] = sum
	}
	return out
}

// smaller is, for each resource, the smaller of a and b; a resource missing
// from either is asked none of.
func smaller(a, b corev1.ResourceList) corev1.ResourceList {
	if a == nil {
		return b
	}
	out := corev1.ResourceList{}
	for name, q := range a {
		if other, ok := b[name]; ok {
			if other.Cmp(q) < 0 {
				q = other
			}
			out[name] = q
		}
	}
	return out
}
