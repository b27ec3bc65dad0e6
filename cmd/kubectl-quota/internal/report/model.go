package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// model is the tree in force charged with its usage.
type model struct {
	object string
	tree   *elastic.Tree
	source string
	notes  []string
	// live is the tree charged from the pods alone, whatever source the
	// figures come from: it tells which shared claims are charged already.
	live *elastic.Tree
}

// newModel builds the tree in force and charges it with the bound pods as they
// are now, plus, when the scheduler wrote status.quotas for this generation,
// the part of each leaf's usage that no bound pod shows (status.quotas' held:
// gangs' reservations and reclaims' holds). Status is written every few
// seconds at most, so its used figures mix pods that have left since with
// pods bound since; only the held part, which the pods cannot show, is taken
// from it. The generation in force is elastic.Tracker's choice, as in the
// scheduler and the autoscaler; kubectl-quota looks once, like a program just
// started, so while the spec is invalid it is the generation status.lastValid
// records. lookup reads the pods' ResourceClaims; nil when they could not be
// listed, and then pods count their requests alone. now ages the held part.
func newModel(obj *schedulingv1beta1.ElasticQuotaTree, pods []*corev1.Pod, lookup claims.Lookup, now time.Time) (*model, error) {
	m := &model{object: obj.Namespace + "/" + obj.Name}
	var tracker elastic.Tracker
	obs := tracker.Observe([]*schedulingv1beta1.ElasticQuotaTree{obj})
	inForce := obs.InForce
	if inForce.Tree == nil {
		return nil, fmt.Errorf("ElasticQuotaTree %s: %w", m.object, obs.Err)
	}
	if !inForce.Current {
		m.notes = append(m.notes, fmt.Sprintf("generation %d of %s is invalid; the quota nodes shown are generation %d's, the last valid one, which stays in force", obj.Generation, m.object, inForce.Generation))
	}
	live, problems := chargePods(inForce.Tree, pods, lookup)
	m.live = live
	m.notes = append(m.notes, problems...)
	// While the spec is invalid, status.quotas describes the generation in
	// force whatever the spec's generation.
	fresh, why := statusFresh(obj, inForce.Tree)
	if !fresh && (inForce.Current || len(obj.Status.Quotas) == 0) {
		m.notes = append(m.notes, why+"; figures are summed from the bound pods")
		m.tree, m.source = live, FromPods
		return m, nil
	}
	m.tree, _ = chargePods(inForce.Tree, pods, lookup)
	m.source = FromStatus
	held, clamped := addHeld(m.tree, obj.Status.Quotas)
	age := "at a time status does not say"
	if t := obj.Status.QuotasTime; t != nil {
		age = duration.HumanDuration(now.Sub(t.Time)) + " ago"
	}
	if len(held) > 0 {
		m.notes = append(m.notes, fmt.Sprintf("%s hold quota no bound pod shows (gangs' reservations, reclaims' holds), as the scheduler measured it %s: it is counted on top of the bound pods", strings.Join(held, ", "), age))
	}
	if len(clamped) > 0 {
		m.notes = append(m.notes, fmt.Sprintf("the held quota measured %s no longer fits beside the bound pods on %s: part of it has been bound since, and only what fits is counted", age, strings.Join(clamped, ", ")))
	}
	return m, nil
}

// statusFresh says whether status.quotas describes this very tree: written for
// the current generation of a tree in force, over the same quota nodes.
func statusFresh(obj *schedulingv1beta1.ElasticQuotaTree, tree *elastic.Tree) (bool, string) {
	if len(obj.Status.Quotas) == 0 {
		return false, "the scheduler has not written status.quotas"
	}
	if obj.Status.ObservedGeneration != obj.Generation {
		return false, fmt.Sprintf("status.quotas describes generation %d, the spec is generation %d", obj.Status.ObservedGeneration, obj.Generation)
	}
	if active := meta.FindStatusCondition(obj.Status.Conditions, schedulingv1beta1.ConditionActive); active == nil || active.Status != metav1.ConditionTrue {
		return false, "the tree is not Active"
	}
	var specNames, statusNames []string
	for _, n := range tree.Nodes() {
		specNames = append(specNames, n.Name())
	}
	for _, q := range obj.Status.Quotas {
		statusNames = append(statusNames, q.Name)
	}
	slices.Sort(specNames)
	slices.Sort(statusNames)
	if !slices.Equal(specNames, statusNames) {
		return false, "status.quotas lists other quota nodes than the spec"
	}
	return true, ""
}

// chargePods is a copy of tree charged with the pods the scheduler charges
// (elastic.Charged) and their claims' devices, the way it rebuilds usage after
// a start. The notes say which pods' devices could not all be read.
func chargePods(tree *elastic.Tree, pods []*corev1.Pod, lookup claims.Lookup) (*elastic.Tree, []string) {
	charged := tree.Uncharged()
	var notes []string
	for _, p := range pods {
		if !elastic.Charged(p) {
			continue
		}
		if _, err := claims.ChargeCounted(charged, p, lookup); err != nil {
			notes = append(notes, fmt.Sprintf("devices left out of the usage: %v", err))
		}
	}
	slices.Sort(notes)
	return charged, notes
}

// addHeld charges each leaf of tree with the held part status reports for it
// (inner nodes' figures are their leaves' sums), and returns the leaves that
// hold quota and those whose held part was cut. The scheduler never lets
// usage pass a max, so what of a held part no longer fits beside the bound
// pods on the leaf's path has been bound since it was measured: only what
// fits is charged, and every figure stays one that could be true now.
func addHeld(tree *elastic.Tree, quotas []schedulingv1beta1.QuotaNodeStatus) (held, clamped []string) {
	heldOf := make(map[string]corev1.ResourceList, len(quotas))
	for _, q := range quotas {
		if len(q.Held) > 0 {
			heldOf[q.Name] = q.Held
		}
	}
	for _, n := range tree.Nodes() {
		namespaces := n.Namespaces()
		h := heldOf[n.Name()]
		if !n.IsLeaf() || len(namespaces) == 0 || len(h) == 0 {
			continue
		}
		fits, cut := fitOnPath(tree, n, h)
		held = append(held, n.Name())
		if cut {
			clamped = append(clamped, n.Name())
		}
		tree.AddRequests(types.UID("held:"+n.Name()), namespaces[0], fits)
	}
	return held, clamped
}

// fitOnPath is the part of request that fits under the max of leaf and every
// ancestor, beside what tree charges them, and whether any was cut.
func fitOnPath(tree *elastic.Tree, leaf elastic.Node, request corev1.ResourceList) (corev1.ResourceList, bool) {
	units := make(map[corev1.ResourceName]int64, len(request))
	for name, q := range request {
		units[name] = max(resources.Units(name, q), 0)
	}
	cut := false
	for n, ok := leaf, true; ok; n, ok = n.Parent() {
		used, _ := tree.Used(n.Name())
		limits := n.Max()
		for name, want := range units {
			limit, limited := limits[name]
			if !limited {
				continue
			}
			room := resources.FlooredSub(resources.Units(name, limit), resources.Units(name, used[name]))
			if want > room {
				units[name], cut = room, true
			}
		}
	}
	out := make(corev1.ResourceList, len(units))
	for name, u := range units {
		out[name] = resources.Quantity(name, u)
	}
	return out, cut
}

// maxWalkDepth bounds recursion over user objects; the CRD allows 8 levels.
const maxWalkDepth = 64

// walkSpec visits a spec in depth-first preorder.
func walkSpec(n *schedulingv1beta1.ElasticQuotaSpec, depth int, visit func(*schedulingv1beta1.ElasticQuotaSpec, int)) {
	if n == nil || depth > maxWalkDepth {
		return
	}
	visit(n, depth)
	for i := range n.Children {
		walkSpec(&n.Children[i], depth+1, visit)
	}
}

// quotaNode is one node of the model with its figures.
func (m *model) quotaNode(n elastic.Node) QuotaNode {
	figures, _ := m.tree.Figures(n.Name())
	out := QuotaNode{
		Name:           n.Name(),
		Parent:         figures.Parent,
		Depth:          n.Depth(),
		Namespaces:     n.Namespaces(),
		ResourceFlavor: n.ResourceFlavor(),
	}
	for _, name := range m.tree.ResourceNames() {
		out.Resources = append(out.Resources, NodeResource{
			Resource: string(name),
			Used:     quantityOr(figures.Used, name, "0"),
			Min:      quantityOr(figures.Min, name, "0"),
			Max:      quantityOr(figures.Max, name, Unlimited),
			Borrowed: quantityOr(figures.Borrowed, name, "0"),
		})
	}
	return out
}

func quantityOr(list corev1.ResourceList, name corev1.ResourceName, missing string) string {
	if q, ok := list[name]; ok {
		return q.String()
	}
	return missing
}
