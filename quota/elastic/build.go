package elastic

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/quota/resources"
)

// Build validates tree and returns its model with zero usage. When any rule
// is violated it returns no tree and an error wrapping a *ValidationError
// that lists every problem; callers keep their last valid tree in force.
func Build(tree *schedulingv1beta1.ElasticQuotaTree) (*Tree, error) {
	if tree == nil {
		return nil, errors.New("build ElasticQuotaTree: tree is nil")
	}
	object := tree.Namespace + "/" + tree.Name
	flat := flatten(&tree.Spec.Root)
	if problems := validate(flat); len(problems) > 0 {
		return nil, fmt.Errorf("build ElasticQuotaTree %s: %w", object, &ValidationError{Object: object, Problems: problems})
	}
	return uncharged(newShape(object, flat)), nil
}

func uncharged(s *shape) *Tree {
	return &Tree{usage: newUsage(s), leaving: newUsage(s), pods: newPodStore(s.index.Len())}
}

// Uncharged is a tree of the same generation with nothing charged. It shares
// the immutable shape and costs no validation, so a program that charges a
// fresh copy on every pass keeps the tree in force instead of building it
// again.
func (t *Tree) Uncharged() *Tree { return uncharged(t.shape) }

// newShape turns a validated flat spec into the immutable model. The index
// holds every resource any node names, so a request for anything else is
// unlimited everywhere and costs nothing to check.
func newShape(object string, flat []flatNode) *shape {
	var lists []corev1.ResourceList
	for i := range flat {
		lists = append(lists, flat[i].spec.Min, flat[i].spec.Max)
	}
	index := resources.IndexOf(lists...)
	s := &shape{
		object: object,
		index:  index,
		nodes:  make([]node, len(flat)),
		byName: make(map[string]int, len(flat)),
		leafOf: map[string]int{},
	}
	for i := range flat {
		f := &flat[i]
		n := &s.nodes[i]
		n.name = f.spec.Name
		n.path = f.path
		n.parent = f.parent
		n.depth = f.depth
		n.namespaces = sortedCopy(f.spec.Namespaces)
		n.min = index.Requests(f.spec.Min)
		n.max = index.Limits(f.spec.Max)
		n.minNamed = make([]bool, index.Len())
		n.named = make([]bool, index.Len())
		for name := range f.spec.Min {
			pos, _ := index.Position(name)
			n.minNamed[pos], n.named[pos] = true, true
		}
		for name := range f.spec.Max {
			pos, _ := index.Position(name)
			n.named[pos] = true
		}
		n.flavor = f.spec.Attributes[schedulingv1beta1.AttributeResourceFlavors]
		if f.parent >= 0 {
			parent := &s.nodes[f.parent]
			parent.children = append(parent.children, i)
			if _, own := f.spec.Attributes[schedulingv1beta1.AttributeResourceFlavors]; !own {
				n.flavor = parent.flavor
			}
		}
		s.byName[n.name] = i
		for _, ns := range n.namespaces {
			s.leafOf[ns] = i
		}
	}
	return s
}
