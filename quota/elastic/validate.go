package elastic

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// flatNode is a spec node placed in depth-first order, with what validation
// and construction need to know about its position.
type flatNode struct {
	spec   *schedulingv1beta1.ElasticQuotaSpec
	label  string // name, or path when the name is empty
	path   string
	parent int
	depth  int
}

// flatten lays the spec out in depth-first preorder. Path segments of
// unnamed nodes are "#<index among siblings>" so every node can be named in a
// message.
func flatten(root *schedulingv1beta1.ElasticQuotaSpec) []flatNode {
	var out []flatNode
	var walk func(spec *schedulingv1beta1.ElasticQuotaSpec, parent, depth, sibling int, parentPath string)
	walk = func(spec *schedulingv1beta1.ElasticQuotaSpec, parent, depth, sibling int, parentPath string) {
		segment := spec.Name
		if segment == "" {
			segment = "#" + strconv.Itoa(sibling)
		}
		path := segment
		if parentPath != "" {
			path = parentPath + "/" + segment
		}
		label := spec.Name
		if label == "" {
			label = path
		}
		self := len(out)
		out = append(out, flatNode{spec: spec, label: label, path: path, parent: parent, depth: depth})
		for i := range spec.Children {
			walk(&spec.Children[i], self, depth+1, i, path)
		}
	}
	walk(root, -1, 1, 0, "")
	return out
}

type validator struct {
	flat     []flatNode
	problems []Problem
}

func (v *validator) report(n *flatNode, rule Rule, format string, args ...any) {
	v.problems = append(v.problems, Problem{Node: n.label, Rule: rule, Message: n.ref() + ": " + fmt.Sprintf(format, args...)})
}

// ref is how messages name a node: by name, or by path when it has none.
func (n *flatNode) ref() string {
	if n.spec.Name == "" {
		return fmt.Sprintf("quota node at %q", n.path)
	}
	return fmt.Sprintf("quota node %q", n.spec.Name)
}

// validate checks every rule on every node and returns all problems, sorted
// by message and de-duplicated.
//
// Comparisons and sums use the same saturated integer units as enforcement,
// never exact Quantity arithmetic: comparing "1e99999999" with "1" exactly
// takes minutes, and a spec must not be able to stall the scheduler.
func validate(flat []flatNode) []Problem {
	v := &validator{flat: flat}
	for i := range flat {
		n := &flat[i]
		v.checkName(n)
		v.checkDepth(n)
		v.checkQuantities(n)
		v.checkDeviceClassNames(n)
		v.checkNamespacesAndFlavor(n)
		v.checkChildrenMin(n)
	}
	v.checkRoot(&flat[0])
	v.checkUniqueNames()
	v.checkNamespaceOwners()
	slices.SortFunc(v.problems, func(a, b Problem) int { return strings.Compare(a.Message, b.Message) })
	return slices.CompactFunc(v.problems, func(a, b Problem) bool { return a.Message == b.Message })
}

func (v *validator) checkName(n *flatNode) {
	if n.spec.Name == "" {
		v.report(n, RuleEmptyName, "name must not be empty")
	}
}

// checkDepth reports only the first level past the limit: the nodes below it
// are too deep by implication and listing them would bury the real problem.
func (v *validator) checkDepth(n *flatNode) {
	if n.depth == schedulingv1beta1.MaxDepth+1 {
		v.report(n, RuleTooDeep, "depth %d exceeds the maximum depth %d", n.depth, schedulingv1beta1.MaxDepth)
	}
}

func (v *validator) checkQuantities(n *flatNode) {
	for _, name := range sortedNames(n.spec.Min) {
		if q := n.spec.Min[name]; q.Sign() < 0 {
			v.report(n, RuleNegativeQuantity, "min %s %s is negative", name, q.String())
		}
	}
	for _, name := range sortedNames(n.spec.Max) {
		if q := n.spec.Max[name]; q.Sign() < 0 {
			v.report(n, RuleNegativeQuantity, "max %s %s is negative", name, q.String())
		}
	}
	for _, name := range sortedNames(n.spec.Min) {
		minQ := n.spec.Min[name]
		maxQ, limited := n.spec.Max[name]
		if limited && maxQ.Sign() >= 0 && resources.Units(name, minQ) > resources.Units(name, maxQ) {
			v.report(n, RuleMinExceedsMax, "min %s %s exceeds max %s %s", name, minQ.String(), name, maxQ.String())
		}
	}
}

// checkDeviceClassNames: a device class is limited like cpu, under core
// ResourceQuota's name for it; one that names no possible class is a typo.
func (v *validator) checkDeviceClassNames(n *flatNode) {
	for _, side := range []struct {
		label string
		list  corev1.ResourceList
	}{{"min", n.spec.Min}, {"max", n.spec.Max}} {
		for _, name := range sortedNames(side.list) {
			class, named := strings.CutSuffix(string(name), corev1.ResourceClaimsPerClass)
			if _, valid := resources.DeviceClassOf(name); named && !valid {
				v.report(n, RuleInvalidDeviceClass, "%s %s names device class %q, which is not a valid DeviceClass name (a lowercase DNS subdomain)",
					side.label, name, class)
			}
		}
	}
}

func (v *validator) checkNamespacesAndFlavor(n *flatNode) {
	if len(n.spec.Children) > 0 && len(n.spec.Namespaces) > 0 {
		v.report(n, RuleNamespacesOnInnerNode, "only leaf nodes may list namespaces, found: %s",
			strings.Join(sortedCopy(n.spec.Namespaces), ", "))
	}
	for _, ns := range sortedCopy(n.spec.Namespaces) {
		if len(validation.IsDNS1123Label(ns)) > 0 {
			v.report(n, RuleInvalidNamespace, "namespace %q is not a valid namespace name (lowercase RFC 1123 label)", ns)
		}
	}
	if flavor, ok := n.spec.Attributes[schedulingv1beta1.AttributeResourceFlavors]; ok && len(validation.IsDNS1123Subdomain(flavor)) > 0 {
		v.report(n, RuleInvalidResourceFlavor, "%s attribute %q is not a valid ResourceFlavor name (lowercase RFC 1123 subdomain)",
			schedulingv1beta1.AttributeResourceFlavors, flavor)
	}
}

// checkChildrenMin keeps the guarantees honest: if the children together are
// promised more than their parent, no reclaim can ever deliver all of them.
func (v *validator) checkChildrenMin(n *flatNode) {
	sums := map[corev1.ResourceName]int64{}
	for i := range n.spec.Children {
		for name, q := range n.spec.Children[i].Min {
			sums[name] = resources.SaturatingAdd(sums[name], resources.Units(name, q))
		}
	}
	names := make([]corev1.ResourceName, 0, len(sums))
	for name := range sums {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		own := n.spec.Min[name]
		if sums[name] > resources.Units(name, own) {
			v.report(n, RuleChildrenMinExceedMin, "sum of children's min %s %s exceeds min %s %s",
				name, resources.Format(name, sums[name]), name, own.String())
		}
	}
}

// checkRoot insists on min == max at the root: the root's max is the capacity
// the tree hands out, and a root guarantee different from it would promise
// either more than exists or leave capacity nobody may reclaim.
func (v *validator) checkRoot(root *flatNode) {
	names := sortedNames(root.spec.Min)
	names = append(names, sortedNames(root.spec.Max)...)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		minQ := root.spec.Min[name]
		maxQ, limited := root.spec.Max[name]
		switch {
		case !limited:
			v.report(root, RuleRootMinNotMax, "root min %s %s differs from max %s unlimited", name, minQ.String(), name)
		case resources.Units(name, minQ) != resources.Units(name, maxQ):
			v.report(root, RuleRootMinNotMax, "root min %s %s differs from max %s %s", name, minQ.String(), name, maxQ.String())
		}
	}
}

func (v *validator) checkUniqueNames() {
	byName := map[string][]int{}
	var order []string
	for i := range v.flat {
		name := v.flat[i].spec.Name
		if name == "" {
			continue
		}
		if _, seen := byName[name]; !seen {
			order = append(order, name)
		}
		byName[name] = append(byName[name], i)
	}
	for _, name := range order {
		holders := byName[name]
		if len(holders) < 2 {
			continue
		}
		paths := make([]string, 0, len(holders))
		for _, i := range holders {
			paths = append(paths, v.flat[i].path)
		}
		v.report(&v.flat[holders[0]], RuleDuplicateName, "name is used by %d nodes: %s", len(holders), strings.Join(paths, ", "))
	}
}

func (v *validator) checkNamespaceOwners() {
	owners := map[string][]int{}
	var order []string
	for i := range v.flat {
		for _, ns := range v.flat[i].spec.Namespaces {
			if _, seen := owners[ns]; !seen {
				order = append(order, ns)
			}
			owners[ns] = append(owners[ns], i)
		}
	}
	for _, ns := range order {
		listings := len(owners[ns])
		holders := slices.Compact(owners[ns]) // one node's repeats are adjacent
		switch {
		case len(holders) > 1:
			labels := make([]string, 0, len(holders))
			for _, i := range holders {
				labels = append(labels, strconv.Quote(v.flat[i].label))
			}
			v.problems = append(v.problems, Problem{Rule: RuleNamespaceInManyNodes,
				Message: fmt.Sprintf("namespace %q is listed by more than one quota node: %s", ns, strings.Join(labels, ", "))})
		case listings > 1:
			v.report(&v.flat[holders[0]], RuleNamespaceRepeated, "namespace %q is listed more than once", ns)
		}
	}
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func sortedCopy(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return out
}
