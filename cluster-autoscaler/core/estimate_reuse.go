package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/estimator"
	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

// Node groups that differ only in names and labels (the same machine type
// in several zones, pools or teams) get the same estimate for pods whose
// checks read no label, or only the hostname, which is every new node's own:
// each new node of either takes the same pods in the same order. Estimating one of them serves the others of the loop, so that
// a loop costs its distinct shapes, not its node groups, as upstream's
// estimator is spared similar node groups.

// estimateKey is what a reusable estimate depends on besides the loop's
// snapshot, which every estimate of a loop starts from: the template's shape,
// the node limit and the pod groups estimated.
type estimateKey struct {
	shape   string
	limit   int
	passing string
}

// reusableKey is the key of an estimate for the given pod groups on
// template, and whether an estimate may be reused at all: no pod group of a
// gang (gangs are placed by trial and error over the new nodes), every pod
// group's check
// reading only the node's shape, no pod of the template with inter-pod
// affinity (a DaemonSet's pods differ from group to group) and no pod of the
// cluster whose anti-affinity reaches beyond its node.
func (r *scaleUpRound) reusableKey(template fwk.NodeInfo, limit int, passing []int) (estimateKey, bool) {
	if len(template.GetPodsWithAffinity()) > 0 || len(template.GetPodsWithRequiredAntiAffinity()) > 0 {
		return estimateKey{}, false
	}
	if r.hostScoped == nil {
		scoped := r.snapshot.HostScopedAntiAffinity()
		r.hostScoped = &scoped
	}
	if !*r.hostScoped {
		return estimateKey{}, false
	}
	var b strings.Builder
	for _, i := range passing {
		if r.groups[i].gang != nil || !r.groups[i].check.ShapeOnly() {
			return estimateKey{}, false
		}
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
	}
	return estimateKey{shape: simulator.NodeShape(template), limit: limit, passing: b.String()}, true
}

// estimate is node group id's estimate for the passing pod groups on its
// template, with the gangs it estimated: BinpackGangs, or an earlier estimate
// of the loop for a node group of the same shape, limit and pod groups, which
// then costs no gathering of the pods either. An estimate cut short by
// --max-nodegroup-binpacking-duration depends on how fast it ran and is not
// reused.
func (a *Autoscaler) estimate(ctx context.Context, r *scaleUpRound, id string, template *cloudprovider.NodeInfo, templateInfo fwk.NodeInfo,
	limit int, passing []int) (estimator.Result, []*gangUnit, error) {
	key, reusable := r.reusableKey(templateInfo, limit, passing)
	reusable = reusable && !a.estimateEveryGroup
	if reusable {
		if est, ok := r.estimates[key]; ok {
			r.reused++
			return est, nil, nil
		}
	}
	pods, gangs, units := r.estimatePods(id, passing)
	newNode := func(i int) (fwk.NodeInfo, []*resourcev1.ResourceSlice, error) {
		return templateNodeInfo(template, id, fmt.Sprintf("new-%d", i))
	}
	est, err := estimator.BinpackGangs(ctx, r.snapshot, pods, gangs, newNode, templateInfo, limit, a.opts.MaxNodeGroupBinpackingDuration)
	if err != nil || !reusable || est.TimedOut {
		return est, units, err
	}
	// Options of several groups share the pods' lists: clipped, an append
	// to one copies it.
	est.Scheduled, est.Unscheduled = slices.Clip(est.Scheduled), slices.Clip(est.Unscheduled)
	r.estimates[key] = est
	return est, units, nil
}
