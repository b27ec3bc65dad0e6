package oracle

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	k8sscheduling "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// The gang promises, judged from the pods' own markings, read here without
// the project's gang package:
//
//   - No gang is left partly bound: at the end of the run, a gang with some
//     but fewer than its size of live pods bound, and never all of them at
//     once, broke it.
//   - A gang not wholly admitted holds no quota. What the oracle can tell
//     such a gang by, from objects alone: fewer live pods than its size, or
//     a size whose requests exceed a max on its path with nothing else
//     charged. At every status write of the tree in force, a quota node's
//     used beyond its bound pods must be explained by pending pods (a gang's
//     reservation, a reclaim's hold, a pod being bound) or by pods released
//     since the last write (the status lags); pending pods of such gangs
//     explain nothing, unless a pod left the gang since the last write: it
//     may have been admissible until then, with that pod. A pod's allowance holds its devices: its claims'
//     allocations, or what they ask before they are allocated (the
//     scheduler charges them from Reserve on).
//
// A gang is a pod's spec.schedulingGroup.podGroupName when the PodGroup has
// a gang policy, or else ACK's labels pod-group.scheduling.sigs.k8s.io/name
// and a positive whole pod-group.scheduling.sigs.k8s.io/min-available.
const (
	ackGangName     = "pod-group.scheduling.sigs.k8s.io/name"
	ackMinAvailable = "pod-group.scheduling.sigs.k8s.io/min-available"
)

type gangRef struct {
	kind, namespace, name string
}

func (g gangRef) String() string { return fmt.Sprintf("%s %s/%s", g.kind, g.namespace, g.name) }

// SetPodGroup records a Workload API PodGroup created or updated.
func (o *Oracle) SetPodGroup(pg *k8sscheduling.PodGroup) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := pg.Namespace + "/" + pg.Name
	if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil && gang.MinCount > 0 {
		o.podGroups[key] = gang.MinCount
	} else {
		delete(o.podGroups, key)
	}
}

// DeletePodGroup records a PodGroup gone.
func (o *Oracle) DeletePodGroup(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.podGroups, namespace+"/"+name)
}

// gangOfLocked is the gang pod belongs to and its size.
func (o *Oracle) gangOfLocked(pod *corev1.Pod) (gangRef, int, bool) {
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		size, ok := o.podGroups[pod.Namespace+"/"+*sg.PodGroupName]
		return gangRef{"PodGroup", pod.Namespace, *sg.PodGroupName}, int(size), ok
	}
	name := pod.Labels[ackGangName]
	if name == "" {
		return gangRef{}, 0, false
	}
	size, err := strconv.ParseInt(pod.Labels[ackMinAvailable], 10, 32)
	if err != nil || size < 1 {
		return gangRef{}, 0, false
	}
	return gangRef{"labels", pod.Namespace, name}, int(size), true
}

// gangMembers are the live pods of every gang: not finished, not deleted.
type gangMembers struct {
	size    int
	bound   []*podState
	pending []*podState
}

func (o *Oracle) gangsLocked() map[gangRef]*gangMembers {
	out := map[gangRef]*gangMembers{}
	for _, st := range o.pods {
		p := st.pod
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ref, size, ok := o.gangOfLocked(p)
		if !ok {
			continue
		}
		g := out[ref]
		if g == nil {
			g = &gangMembers{size: size}
			out[ref] = g
		}
		if st.counted {
			g.bound = append(g.bound, st)
		} else {
			g.pending = append(g.pending, st)
		}
	}
	return out
}

// noteGangLocked remembers the gangs ever seen with all their size bound.
func (o *Oracle) noteGangLocked(pod *corev1.Pod) {
	ref, size, ok := o.gangOfLocked(pod)
	if !ok || o.gangsWhole[ref] {
		return
	}
	if g := o.gangsLocked()[ref]; g != nil && len(g.bound) >= size {
		o.gangsWhole[ref] = true
	}
}

// partlyBoundLocked are the gangs left with some, not all, of their pods
// bound, and never whole. A pod relabelled from one gang to another while it
// waited may have been admitted with its old gang all the same: the
// scheduler may have decided before the label changed, and binding cannot be
// undone. So a gang is not blamed when its bound leavers make it whole, nor
// when only pods that joined it while waiting are bound.
func (o *Oracle) partlyBoundLocked() []string {
	var out []string
	gangs := o.gangsLocked()
	for _, ref := range sortedGangs(gangs) {
		g := gangs[ref]
		n := len(g.bound)
		if n == 0 || n >= g.size || o.gangsWhole[ref] ||
			n+o.boundMovedLocked(o.leavers[ref]) >= g.size || n == o.boundMovedLocked(o.joiners[ref]) {
			continue
		}
		out = append(out, fmt.Sprintf("gang %s: %d of its %d pods bound, and never all of them", ref, n, g.size))
	}
	return out
}

// noteMovedLocked remembers a waiting pod relabelled from one gang to
// another, or to none, between its last seen state, was, and now.
func (o *Oracle) noteMovedLocked(was, now *corev1.Pod) {
	from, _, _ := o.gangOfLocked(was)
	to, _, _ := o.gangOfLocked(now)
	if to == from {
		return
	}
	note := func(m map[gangRef]map[types.UID]bool, ref gangRef) {
		if m[ref] == nil {
			m[ref] = map[types.UID]bool{}
		}
		m[ref][now.UID] = true
	}
	if from.name != "" {
		note(o.leavers, from)
		o.leftSince[from], o.movedSince[now.UID] = true, true
	}
	if to.name != "" {
		note(o.joiners, to)
	}
}

// noteLeftLocked remembers that a pod left its gang, deleted.
func (o *Oracle) noteLeftLocked(pod *corev1.Pod) {
	if ref, _, _ := o.gangOfLocked(pod); ref.name != "" {
		o.leftSince[ref] = true
	}
}

// boundMovedLocked counts the pods of moved that are bound now.
func (o *Oracle) boundMovedLocked(moved map[types.UID]bool) int {
	n := 0
	for uid := range moved {
		if st := o.pods[uid]; st != nil && st.counted && st.pod.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// judgeHeldLocked checks a status write of the tree in force: a quota
// node's used beyond its bound pods is held for pending pods, and never for
// a gang that cannot be admitted whole.
func (o *Oracle) judgeHeldLocked(t *quotaTree, status []schedulingv1beta1.QuotaNodeStatus) {
	defer func() {
		o.released, o.leftSince, o.movedSince = map[string]corev1.ResourceList{}, map[gangRef]bool{}, map[types.UID]bool{}
	}()
	used := o.usageLocked(t)
	pos := map[string]int{}
	for i, n := range t.nodes {
		pos[n.name] = i
	}
	allowance := make([]corev1.ResourceList, len(t.nodes))
	for i := range allowance {
		allowance[i] = corev1.ResourceList{}
	}
	// blocked are, by tree node, the gangs under it that may hold nothing.
	blocked := map[int][]string{}
	gangs := o.gangsLocked()
	for _, st := range o.pods {
		p := st.pod
		leaf, governed := t.leafOf[p.Namespace]
		if st.counted || !governed || p.DeletionTimestamp != nil {
			continue
		}
		// A gang a pod left since the last write may have been admissible
		// until then, the pod with it: what they held may still show.
		if ref, _, inGang := o.gangOfLocked(p); inGang && !o.leftSince[ref] && !o.movedSince[p.UID] {
			if why := o.mayHoldNothingLocked(t, leaf, gangs[ref]); why != "" {
				for n := leaf; n >= 0; n = t.nodes[n].parent {
					blocked[n] = appendOnce(blocked[n], fmt.Sprintf("gang %s (%s)", ref, why))
				}
				continue
			}
		}
		addUp(t, allowance, leaf, st.requests)
		addUp(t, allowance, leaf, o.mayHoldDevicesLocked(p, st.requests))
	}
	for ns, requests := range o.released {
		if leaf, ok := t.leafOf[ns]; ok {
			addUp(t, allowance, leaf, requests)
		}
	}
	for _, s := range status {
		i, ok := pos[s.Name]
		if !ok || len(blocked[i]) == 0 {
			continue
		}
		for _, r := range sortedKeys(s.Used) {
			shown := s.Used[r]
			held := shown.DeepCopy()
			held.Sub(used[i][r])
			if held.Cmp(allowance[i][r]) > 0 {
				o.violateLocked(fmt.Sprintf("quota node %q of %s: status shows %s %s used, %s of it for no bound or admissible pending pod, while %v may hold nothing",
					s.Name, t.object, r, shown.String(), held.String(), slices.Sorted(slices.Values(blocked[i]))))
			}
		}
	}
}

// mayHoldNothingLocked says why gang g, of a namespace of leaf, cannot be
// admitted whole, or "" when it may be.
func (o *Oracle) mayHoldNothingLocked(t *quotaTree, leaf int, g *gangMembers) string {
	live := len(g.bound) + len(g.pending)
	if live < g.size {
		return fmt.Sprintf("%d of its %d pods exist", live, g.size)
	}
	// Whichever size members are counted, each resource is at least the sum
	// of its size smallest requests: judged on that, heterogeneous gangs are
	// never blamed for a choice the scheduler did not make.
	var members []corev1.ResourceList
	for _, st := range append(append([]*podState{}, g.bound...), g.pending...) {
		members = append(members, st.requests)
	}
	if over := overMax(t, leaf, smallestSum(members, g.size)); over != "" {
		return fmt.Sprintf("its %d pods request %s", g.size, over)
	}
	return ""
}

// releasedLocked remembers the requests and devices of a pod that stopped
// holding capacity, until the next status write: the status may not show it
// yet.
func (o *Oracle) releasedLocked(st *podState) {
	o.addReleasedLocked(st.pod.Namespace, st.requests)
	o.addReleasedLocked(st.pod.Namespace, o.mayHoldDevicesLocked(st.pod, st.requests))
}

func (o *Oracle) addReleasedLocked(namespace string, requests corev1.ResourceList) {
	sum := o.released[namespace]
	if sum == nil {
		sum = corev1.ResourceList{}
		o.released[namespace] = sum
	}
	for name, q := range requests {
		addQuantity(sum, name, q)
	}
}

func addUp(t *quotaTree, into []corev1.ResourceList, leaf int, requests corev1.ResourceList) {
	for n := leaf; n >= 0; n = t.nodes[n].parent {
		for name, q := range requests {
			sum := into[n][name]
			sum.Add(q)
			into[n][name] = sum
		}
	}
}

func appendOnce(list []string, s string) []string {
	for _, have := range list {
		if have == s {
			return list
		}
	}
	return append(list, s)
}

func sortedGangs(gangs map[gangRef]*gangMembers) []gangRef {
	byKey := map[string]gangRef{}
	for ref := range gangs {
		byKey[ref.String()] = ref
	}
	out := make([]gangRef, 0, len(byKey))
	for _, k := range sortedKeys(byKey) {
		out = append(out, byKey[k])
	}
	return out
}
