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
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/resources"
)

// model is the tree in force charged with its usage.
type model struct {
	object string
	tree   *elastic.Tree
	source string
	notes  []string
}

// newModel builds the tree in force and charges it, from status.quotas when
// the scheduler wrote them for this generation, else from the bound pods. When
// the spec is invalid the scheduler still enforces the last valid generation,
// which elastic.LastValid finds in status.lastValid, as the scheduler does.
func newModel(obj *schedulingv1beta1.ElasticQuotaTree, pods []*corev1.Pod) (*model, error) {
	m := &model{object: obj.Namespace + "/" + obj.Name}
	enforced, err := elastic.LastValid(obj, nil)
	if enforced.Tree == nil {
		return nil, fmt.Errorf("ElasticQuotaTree %s: %w", m.object, err)
	}
	shape, spec := enforced.Tree, obj
	if !enforced.Current {
		spec = &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: obj.ObjectMeta, Spec: *enforced.Spec, Status: obj.Status}
		spec.Generation = enforced.Generation
		m.notes = append(m.notes, fmt.Sprintf("generation %d of %s is invalid; the quota nodes shown are generation %d's, the last valid one, which stays in force", obj.Generation, m.object, enforced.Generation))
	}
	live, err := chargePods(spec, pods)
	if err != nil {
		return nil, err
	}
	if fresh, why := statusFresh(obj, shape); fresh || !enforced.Current {
		if charged, ok := chargeStatus(spec, obj.Status.Quotas); ok {
			m.tree, m.source = charged, FromStatus
			if differ := differingNodes(charged, live); len(differ) > 0 {
				m.notes = append(m.notes, fmt.Sprintf("status.quotas differs from the bound pods' requests on %s: status is written every few seconds and also counts pods being bound and quota held for a reclaim", strings.Join(differ, ", ")))
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

// chargePods is the tree charged with the requests of the bound, running pods,
// the way the scheduler rebuilds usage after a start.
func chargePods(spec *schedulingv1beta1.ElasticQuotaTree, pods []*corev1.Pod) (*elastic.Tree, error) {
	tree, err := elastic.Build(spec)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if counts(p) {
			tree.AddPod(p)
		}
	}
	return tree, nil
}

// counts says whether a pod is charged to its quota: bound and not finished.
func counts(p *corev1.Pod) bool {
	return p != nil && p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !resources.PodFinished(p)
}

// chargeStatus charges every leaf with the usage status reports for it, so the
// library's Admit judges against the scheduler's own figures. Inner nodes are
// sums of their leaves; when status disagrees with that, it is not used.
func chargeStatus(spec *schedulingv1beta1.ElasticQuotaTree, quotas []schedulingv1beta1.QuotaNodeStatus) (*elastic.Tree, bool) {
	tree, err := elastic.Build(spec)
	if err != nil {
		return nil, false
	}
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
