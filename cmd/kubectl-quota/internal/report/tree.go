package report

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// Tree reports every tree of the snapshot, the one in force first, then by
// namespace and name. Only the tree in force has usage: the others govern
// nothing.
func Tree(s Snapshot) TreeReport {
	out := TreeReport{Kind: "TreeReport", APIVersion: APIVersion, Trees: []TreeView{}, Notes: s.Notes}
	inForce := elastic.InForce(s.Trees)
	trees := slices.DeleteFunc(slices.Clone(s.Trees), func(t *schedulingv1beta1.ElasticQuotaTree) bool { return t == nil })
	slices.SortFunc(trees, func(a, b *schedulingv1beta1.ElasticQuotaTree) int {
		switch {
		case a == inForce:
			return -1
		case b == inForce:
			return 1
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, t := range trees {
		out.Trees = append(out.Trees, treeView(t, t == inForce, s))
	}
	if inForce == nil {
		out.Notes = append(out.Notes, "no ElasticQuotaTree in kube-system: no elastic quota is enforced")
	}
	return out
}

func treeView(obj *schedulingv1beta1.ElasticQuotaTree, inForce bool, s Snapshot) TreeView {
	view := TreeView{
		Tree:               obj.Namespace + "/" + obj.Name,
		InForce:            inForce,
		Generation:         obj.Generation,
		ObservedGeneration: obj.Status.ObservedGeneration,
		Resources:          []string{},
		Nodes:              []QuotaNode{},
	}
	for _, c := range obj.Status.Conditions {
		view.Conditions = append(view.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	slices.SortFunc(view.Conditions, func(a, b Condition) int { return strings.Compare(a.Type, b.Type) })
	if inForce {
		m, err := newModel(obj, s.Pods, s.claimLookup(), s.Now)
		if err == nil {
			view.FiguresFrom = m.source
			view.Notes = m.notes
			for _, name := range m.tree.ResourceNames() {
				view.Resources = append(view.Resources, string(name))
			}
			for _, n := range m.tree.Nodes() {
				view.Nodes = append(view.Nodes, m.quotaNode(n))
			}
			return view
		}
		view.Notes = append(view.Notes, err.Error())
	}
	if tree, err := elastic.Build(obj); err == nil {
		for _, name := range tree.ResourceNames() {
			view.Resources = append(view.Resources, string(name))
		}
		for _, n := range tree.Nodes() {
			view.Nodes = append(view.Nodes, specNode(n.Name(), parentName(n), n.Depth(), n.Namespaces(), n.ResourceFlavor(), n.Min(), n.Max(), tree.ResourceNames()))
		}
		return view
	} else if !inForce {
		view.Notes = append(view.Notes, err.Error())
	}
	view.Resources, view.Nodes = rawNodes(obj)
	return view
}

func parentName(n elastic.Node) string {
	if p, ok := n.Parent(); ok {
		return p.Name()
	}
	return ""
}

// rawNodes lays an invalid spec out as written, so its author still sees it.
func rawNodes(obj *schedulingv1beta1.ElasticQuotaTree) ([]string, []QuotaNode) {
	seen := map[corev1.ResourceName]bool{}
	walkSpec(&obj.Spec.Root, 1, func(n *schedulingv1beta1.ElasticQuotaSpec, _ int) {
		for name := range n.Min {
			seen[name] = true
		}
		for name := range n.Max {
			seen[name] = true
		}
	})
	var names []corev1.ResourceName
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	var nodes []QuotaNode
	parents := map[int]string{}
	walkSpec(&obj.Spec.Root, 1, func(n *schedulingv1beta1.ElasticQuotaSpec, depth int) {
		parents[depth] = n.Name
		nodes = append(nodes, specNode(n.Name, parents[depth-1], depth, n.Namespaces,
			n.Attributes[schedulingv1beta1.AttributeResourceFlavors], n.Min, n.Max, names))
	})
	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, string(name))
	}
	return out, nodes
}

// specNode is a quota node without usage.
func specNode(name, parent string, depth int, namespaces []string, flavor string, min, max corev1.ResourceList, names []corev1.ResourceName) QuotaNode {
	n := QuotaNode{Name: name, Parent: parent, Depth: depth, Namespaces: slices.Sorted(slices.Values(namespaces)), ResourceFlavor: flavor}
	for _, r := range names {
		n.Resources = append(n.Resources, NodeResource{
			Resource: string(r),
			Min:      quantityOr(min, r, "0"),
			Max:      quantityOr(max, r, Unlimited),
		})
	}
	return n
}

// conditionSummary is "Valid=True Active=True (generation 1 is in force)".
func conditionSummary(conditions []Condition) string {
	if len(conditions) == 0 {
		return "no conditions yet (the scheduler has not seen this tree)"
	}
	parts := make([]string, 0, len(conditions))
	for _, c := range conditions {
		part := c.Type + "=" + c.Status
		if c.Status != "True" || c.Type == schedulingv1beta1.ConditionActive {
			if c.Message != "" {
				part += fmt.Sprintf(" (%s)", c.Message)
			}
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
