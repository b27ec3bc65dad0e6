package core

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/estimator"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
)

// A gang's pods are useless alone: kube-scheduler holds them at Permit until
// the gang's minimum is placed. So a scale-up takes a gang's unit, the pods
// the tree admits as one (gang.SplitMembers: its first MinCount members less
// those bound), together: an option for a node group places all of them, on
// the free room of existing and upcoming nodes and on new nodes of that
// group, or adds no node for the gang at all. A member past the unit is a pod
// like any other once the unit is placed (the ElasticQuotaTree processor
// judged it alone), and gets no node while the unit gets none: the scheduler
// admits no member before the gang. Pods of no gang are estimated first and
// exactly as before, so gangs change nothing for them.

// gangUnit is a gang with pods waiting for a node in this loop.
type gangUnit struct {
	gang gang.Gang
	// pods are the gang's unit: its first members not bound to a node, as
	// many as its minimum less its members bound, whether or not the
	// scheduler has marked them unschedulable yet: all of them need a place
	// for the gang to start.
	pods []*corev1.Pod
	// need is how many of pods are still to be placed: all of them, less
	// those placed on free room in this loop.
	need int
}

// gangsOf finds the gangs of the pending pods. It returns the pods to
// simulate (pending, and the members of the gangs' units not pending yet),
// the gangs by key, and the pods of gangs no scale-up can help: a gang that
// cannot be read (bad labels, a PodGroup that does not exist) or has fewer
// pods than its minimum, which kube-scheduler does not try to place. A
// pending member past its gang's unit stays among the pods to simulate; a
// member past it that is not pending (the ElasticQuotaTree refused it, or
// the scheduler has not tried it) is not added.
func (a *Autoscaler) gangsOf(ctx context.Context, pending []*corev1.Pod) ([]*corev1.Pod, map[gang.Key]*gangUnit, []processors.RefusedPod, error) {
	waiting := map[gang.Key][]*corev1.Pod{}
	var keys []gang.Key
	for _, p := range pending {
		if k, ok := gang.RefOf(p); ok {
			if _, seen := waiting[k]; !seen {
				keys = append(keys, k)
			}
			waiting[k] = append(waiting[k], p)
		}
	}
	if len(keys) == 0 {
		return pending, nil, nil, nil
	}
	all, err := a.Pods.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, apiCallError(fmt.Errorf("listing pods: %w", err))
	}
	candidates := map[gang.Key][]*corev1.Pod{}
	for _, p := range all {
		if k, ok := gang.RefOf(p); ok && waiting[k] != nil {
			candidates[k] = append(candidates[k], p)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		if keys[i].Name != keys[j].Name {
			return keys[i].Name < keys[j].Name
		}
		return keys[i].Kind < keys[j].Kind
	})
	pods := append([]*corev1.Pod(nil), pending...)
	units := map[gang.Key]*gangUnit{}
	var refused []processors.RefusedPod
	inPending := map[*corev1.Pod]bool{}
	for _, p := range pending {
		inPending[p] = true
	}
	for _, k := range keys {
		unit, why := a.gangUnit(k, waiting[k][0], gang.Members(k, candidates[k]))
		switch {
		case why != "":
			klog.FromContext(ctx).V(2).Info("Gang gets no scale-up", "gang", k.String(), "reason", why)
			for _, p := range waiting[k] {
				refused = append(refused, processors.RefusedPod{Pod: p, Reason: processors.NewReason(processors.MessagePodRefused, why), Gang: unitGang(unit)})
			}
		case unit != nil:
			units[k] = unit
			for _, p := range unit.pods {
				if !inPending[p] {
					pods = append(pods, p)
				}
			}
		}
	}
	if len(refused) > 0 {
		pods = withoutRefused(pods, refused)
	}
	return pods, units, refused, nil
}

func unitGang(u *gangUnit) *gang.Gang {
	if u == nil {
		return nil
	}
	return &u.gang
}

// gangUnit reads the gang of key from sample, one of its pending pods, and
// splits its members as the tree admits them. It returns nil and no reason
// when the pods are to be scaled up for one by one: a PodGroup of the basic
// policy, or a gang whose minimum is bound already.
func (a *Autoscaler) gangUnit(key gang.Key, sample *corev1.Pod, members []*corev1.Pod) (*gangUnit, string) {
	g, isGang, err := gang.Of(sample, a.PodGroups)
	if err != nil {
		return nil, err.Error()
	}
	if !isGang {
		return nil, ""
	}
	split := gang.SplitMembers(g, members, elastic.Charged)
	if split.Whole() {
		return nil, ""
	}
	u := &gangUnit{gang: g, pods: split.Unit, need: len(split.Unit)}
	if split.Missing > 0 {
		return u, fmt.Sprintf("gang %s has %d of its %d pods", key, len(members), g.MinCount)
	}
	return u, ""
}

func withoutRefused(pods []*corev1.Pod, refused []processors.RefusedPod) []*corev1.Pod {
	out := make(map[*corev1.Pod]bool, len(refused))
	for _, r := range refused {
		out[r.Pod] = true
	}
	kept := pods[:0]
	for _, p := range pods {
		if !out[p] {
			kept = append(kept, p)
		}
	}
	return kept
}

// assignGangs marks each equivalence group with its gang, splitting off the
// members past the gang's unit into a group of their own, and orders the
// groups of no gang first, then the units, then the members past them: the
// groups of no gang take free room as they would without gangs, and a member
// past its unit takes none the unit needs.
func assignGangs(groups []*podGroup, units map[gang.Key]*gangUnit) []*podGroup {
	if len(units) == 0 {
		return groups
	}
	var loose, ganged, past []*podGroup
	for _, g := range groups {
		k, ok := gang.RefOf(g.sample())
		u := units[k]
		if !ok || u == nil {
			loose = append(loose, g)
			continue
		}
		inUnit, beyond := splitGroup(g, u)
		if inUnit != nil {
			ganged = append(ganged, inUnit)
		}
		if beyond != nil {
			past = append(past, beyond)
		}
	}
	out := append(loose, ganged...)
	out = append(out, past...)
	for i, g := range out {
		g.id = i
	}
	return out
}

// splitGroup splits an equivalence group of gang unit u's pods into its pods
// in the unit and those past it; either is nil when it has none.
func splitGroup(g *podGroup, u *gangUnit) (inUnit, past *podGroup) {
	unit := make(map[*corev1.Pod]bool, len(u.pods))
	for _, p := range u.pods {
		unit[p] = true
	}
	for _, p := range g.pods {
		if unit[p] {
			if inUnit == nil {
				inUnit = &podGroup{gang: u}
			}
			inUnit.pods = append(inUnit.pods, p)
			continue
		}
		if past == nil {
			past = &podGroup{pastOf: u}
		}
		past.pods = append(past.pods, p)
	}
	return inUnit, past
}

// placedOnFreeRoom lowers each gang's need by its pods that free room took,
// which are in placed but no longer in remaining.
func placedOnFreeRoom(placed, remaining []*podGroup) {
	left := map[*corev1.Pod]bool{}
	for _, g := range remaining {
		for _, p := range g.pods {
			left[p] = true
		}
	}
	for _, g := range placed {
		if g.gang == nil {
			continue
		}
		for _, p := range g.pods {
			if !left[p] {
				g.gang.need--
			}
		}
	}
}

// estimatePods splits the prepared pods of the passing equivalence groups
// into those of no gang and the gangs this node group could take whole, with
// the members past each gang's unit. A gang with an equivalence group the
// template rejects is rejected whole, with that group's reasons, and so are
// the members past its unit. Members past a unit placed wholly on free room
// are pods of no gang.
func (r *scaleUpRound) estimatePods(id string, passing []int) ([]estimator.Pod, []estimator.Gang, []*gangUnit) {
	passes := map[int]bool{}
	for _, i := range passing {
		passes[i] = true
	}
	rejected := map[*gangUnit][]processors.Reason{}
	for i, g := range r.groups {
		if g.gang != nil && !passes[i] {
			rejected[g.gang] = r.info[i].Rejected[id]
		}
	}
	var loose []estimator.Pod
	var gangs []estimator.Gang
	var units []*gangUnit
	at := map[*gangUnit]int{}
	for _, i := range passing {
		u := r.groups[i].gang
		switch {
		case u == nil:
			if r.groups[i].pastOf == nil {
				loose = append(loose, r.prepared[i]...)
			}
		case rejected[u] != nil:
			r.info[i].Rejected[id] = rejected[u]
		default:
			j, ok := at[u]
			if !ok {
				j = len(gangs)
				at[u] = j
				gangs = append(gangs, estimator.Gang{})
				units = append(units, u)
			}
			gangs[j].Pods = append(gangs[j].Pods, r.prepared[i]...)
		}
	}
	for _, i := range passing {
		u := r.groups[i].pastOf
		j, estimated := at[u]
		switch {
		case u == nil:
		case estimated:
			gangs[j].Past = append(gangs[j].Past, r.prepared[i]...)
		case rejected[u] != nil:
			r.info[i].Rejected[id] = rejected[u]
		case u.need <= 0:
			loose = append(loose, r.prepared[i]...)
		}
	}
	return loose, gangs, units
}

// gangsLeftOut marks the equivalence groups of each gang the estimate left
// out, and those of the members past its unit, as skipped by the node group,
// for what held the group's limit below what the gang needs, and tells the
// limiters that capped it.
func (a *Autoscaler) gangsLeftOut(ctx context.Context, r *scaleUpRound, gs *clusterstate.GroupState, units []*gangUnit,
	results []estimator.GangResult, capped []processors.Reason) {
	id := gs.Group.Id()
	for j, u := range units {
		res := results[j]
		if res.Placed || res.Nodes == 0 {
			// Placed, or no number of new nodes of the group would do.
			continue
		}
		reasons := capped
		if len(reasons) == 0 {
			reasons = []processors.Reason{reasonMaxSize}
			if a.opts.MaxNodesPerScaleUp > 0 && a.opts.MaxNodesPerScaleUp < gs.Max-gs.Target {
				reasons = []processors.Reason{reasonMaxPerScale}
			}
		} else {
			for _, l := range a.limiters {
				if gl, ok := l.(processors.GangLimiter); ok {
					gl.GangCapped(ctx, r.lc, gs.Group, u.gang)
				}
			}
		}
		for i, g := range r.groups {
			if g.gang == u || g.pastOf == u {
				r.info[i].Skipped[id] = reasons
			}
		}
		klog.FromContext(ctx).V(2).Info("Gang left out of a node group's scale-up", "gang", u.gang.Key.String(), "nodeGroup", id,
			"needsNodes", res.Nodes, "pods", u.need)
	}
}

// carriesGang says whether an option's pods include a gang's: a gang's
// nodes are not spread over similar groups, whose limits could then leave it
// short.
func carriesGang(groups []*podGroup, pods []*corev1.Pod) bool {
	ganged := map[*corev1.Pod]bool{}
	for _, g := range groups {
		if g.gang != nil {
			for _, p := range g.pods {
				ganged[p] = true
			}
		}
	}
	for _, p := range pods {
		if ganged[p] {
			return true
		}
	}
	return false
}
