package report

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// newModel builds the tree in force and charges it, from status.quotas when
// the scheduler wrote them for this generation, else from the bound pods.
// Status lags the pods by up to the scheduler's write interval, so a leaf
// whose bound pods now request more than status says is charged the pods'
// figures: a pod bound since the last write must not leave room that the
// scheduler no longer has. The
// generation in force is elastic.Tracker's choice, as in the scheduler and the
// autoscaler; kubectl-quota looks once, like a program just started, so while
// the spec is invalid it is the generation status.lastValid records.
// lookup reads the pods' ResourceClaims; nil when they could not be listed,
// and then pods count their requests alone.
func newModel(obj *schedulingv1beta1.ElasticQuotaTree, pods []*corev1.Pod, lookup claims.Lookup) (*model, error) {
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
	if fresh || (!inForce.Current && len(obj.Status.Quotas) > 0) {
		if charged, ok := chargeStatus(inForce.Tree, obj.Status.Quotas); ok {
			merged, raised := raiseToPods(charged, live)
			m.tree, m.source = merged, FromStatus
			if len(raised) > 0 {
				m.notes = append(m.notes, fmt.Sprintf("the bound pods request more than status.quotas on %s, which the scheduler writes every few seconds: their figures are used there", strings.Join(raised, ", ")))
			}
			if differ := differingNodes(merged, live); len(differ) > 0 {
				m.notes = append(m.notes, fmt.Sprintf("status.quotas counts more than the bound pods' requests on %s: status also counts pods being bound and quota held for a reclaim, and counts pods that left until its next write", strings.Join(differ, ", ")))
			}
			return m, nil
		}
		m.notes = append(m.notes, "status.quotas does not add up over the tree; figures are summed from the bound pods")
	} else {
		m.notes = append(m.notes, why+"; figures are summed from the bound pods")
	}
	m.tree, m.source = live, FromPods
	return m, nil
}

// statusFresh says whether status.quotas describes this very tree: written for
// the current generation of a tree in force, over the same quota nodes. The
// scheduler writes status only on change, so there is no timestamp to age.
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

// chargeStatus charges every leaf with the usage status reports for it, so the
// library's Admit judges against the scheduler's own figures. Inner nodes are
// sums of their leaves; when status disagrees with that, it is not used.
func chargeStatus(shape *elastic.Tree, quotas []schedulingv1beta1.QuotaNodeStatus) (*elastic.Tree, bool) {
	tree := shape.Uncharged()
	used := make(map[string]corev1.ResourceList, len(quotas))
	for _, q := range quotas {
		used[q.Name] = q.Used
	}
	for _, n := range tree.Nodes() {
		if namespaces := n.Namespaces(); n.IsLeaf() && len(namespaces) > 0 {
			tree.AddRequests(types.UID("status:"+n.Name()), namespaces[0], used[n.Name()])
		}
	}
	index := resources.NewIndex(tree.ResourceNames()...)
	for _, q := range quotas {
		got, ok := tree.Used(q.Name)
		if !ok || !index.Requests(got).Equal(index.Requests(q.Used)) {
			return nil, false
		}
	}
	return tree, true
}

// raiseToPods is fromStatus with each leaf charged, resource by resource, the
// larger of its status figure and what the bound pods charge it (live), and
// the leaves that live raised. Status alone also counts what the pods do not
// show (pods being bound, quota held for a reclaim); the pods alone show what
// was bound since status was last written.
func raiseToPods(fromStatus, live *elastic.Tree) (*elastic.Tree, []string) {
	merged := fromStatus.Uncharged()
	var raised []string
	for _, n := range fromStatus.Nodes() {
		namespaces := n.Namespaces()
		if !n.IsLeaf() || len(namespaces) == 0 {
			continue
		}
		fromLeaf, _ := fromStatus.Used(n.Name())
		byPods, _ := live.Used(n.Name())
		used := make(corev1.ResourceList, len(fromLeaf))
		for name, q := range fromLeaf {
			used[name] = q.DeepCopy()
		}
		higher := false
		for name, q := range byPods {
			// A missing figure is the zero Quantity: zero charges raise nothing.
			if q.Cmp(used[name]) > 0 {
				used[name], higher = q.DeepCopy(), true
			}
		}
		if higher {
			raised = append(raised, n.Name())
		}
		merged.AddRequests(types.UID("usage:"+n.Name()), namespaces[0], used)
	}
	return merged, raised
}

// differingNodes names the quota nodes whose usage differs between a and b.
func differingNodes(a, b *elastic.Tree) []string {
	index := resources.NewIndex(a.ResourceNames()...)
	var out []string
	for _, n := range a.Nodes() {
		ua, _ := a.Used(n.Name())
		ub, _ := b.Used(n.Name())
		if !index.Requests(ua).Equal(index.Requests(ub)) {
			out = append(out, n.Name())
		}
	}
	return out
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
