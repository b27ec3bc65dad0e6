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
	"github.com/quotascale/quotascale/quota/gang"
)

// A gang's pods are useless alone: kube-scheduler holds them at Permit until
// the gang's minimum is placed. So a scale-up takes a gang as one unit: an
// option for a node group places all the pods the gang still needs, on the
// free room of existing and upcoming nodes and on new nodes of that group, or
// adds no node for the gang at all. Pods of no gang are estimated first and
// exactly as before, so gangs change nothing for them.

// gangUnit is a gang with pods waiting for a node in this loop.
type gangUnit struct {
	gang gang.Gang
	// pods are the gang's live members not bound to a node, whether or not
	// the scheduler has marked them unschedulable yet: all of them need a
	// place for the gang to start.
	pods []*corev1.Pod
	// need is how many of pods must be placed: the gang's minimum less its
	// members bound already, less those placed on free room in this loop.
	need int
}

// gangsOf finds the gangs of the pending pods. It returns the pods to
// simulate (pending, and the gangs' other members not bound yet), the gangs
// by key, and the pods of gangs no scale-up can help: a gang that cannot be
// read (bad labels, a PodGroup that does not exist) or has fewer pods than
// its minimum, which kube-scheduler does not try to place.
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

// gangUnit reads the gang of key from sample, one of its pending pods. It
// returns nil and no reason when the pods are to be scaled up for one by one:
// a PodGroup of the basic policy, or a gang whose minimum is bound already.
func (a *Autoscaler) gangUnit(key gang.Key, sample *corev1.Pod, members []*corev1.Pod) (*gangUnit, string) {
	g, isGang, err := gang.Of(sample, a.PodGroups)
	if err != nil {
		return nil, err.Error()
	}
	if !isGang {
		return nil, ""
	}
	u := &gangUnit{gang: g, need: int(g.MinCount)}
	for _, m := range members {
		if m.Spec.NodeName != "" {
			u.need--
		} else {
			u.pods = append(u.pods, m)
		}
	}
	if u.need <= 0 {
		return nil, ""
	}
	if len(u.pods) < u.need {
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

// assignGangs marks each equivalence group with its gang and orders the
// groups of no gang first: they take free room as they would without gangs.
func assignGangs(groups []*podGroup, units map[gang.Key]*gangUnit) []*podGroup {
	if len(units) == 0 {
		return groups
	}
	var loose, ganged []*podGroup
	for _, g := range groups {
		if k, ok := gang.RefOf(g.sample()); ok && units[k] != nil {
			g.gang = units[k]
			ganged = append(ganged, g)
			continue
		}
		loose = append(loose, g)
	}
	return append(loose, ganged...)
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
// into those of no gang and the gangs this node group could take whole. A
// gang with an equivalence group the template rejects is rejected whole, with
// that group's reasons.
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
			loose = append(loose, r.prepared[i]...)
		case rejected[u] != nil:
			r.info[i].Rejected[id] = rejected[u]
		default:
			j, ok := at[u]
			if !ok {
				j = len(gangs)
				at[u] = j
				gangs = append(gangs, estimator.Gang{Need: u.need})
				units = append(units, u)
			}
			gangs[j].Pods = append(gangs[j].Pods, r.prepared[i]...)
		}
	}
	return loose, gangs, units
}

// gangsLeftOut marks the equivalence groups of each gang the estimate left
// out as skipped by the node group, for what held the group's limit below
// what the gang needs, and tells the limiters that capped it.
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
			if g.gang == u {
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
