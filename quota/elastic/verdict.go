package elastic

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/quota/resources"
)

// Verdict is the outcome of an admission check. The zero Verdict means the
// namespace is not governed by the tree, which admits.
type Verdict struct {
	// Leaf is the leaf the namespace is charged to; empty when no leaf lists it.
	Leaf string
	// Excesses lists every node the request would push past its max, from the
	// leaf upwards (deepest first), so the most specific cause comes first.
	// Empty when admitted.
	Excesses []Excess
}

// Excess is one quota node a request does not fit.
type Excess struct {
	Node  string
	Depth int
	// Resources are the exceeded resources, sorted by name.
	Resources []ResourceExcess
}

// ResourceExcess carries the numbers behind one exceeded resource.
type ResourceExcess struct {
	Resource  corev1.ResourceName
	Used      resource.Quantity
	Requested resource.Quantity
	Max       resource.Quantity
}

// Admitted reports whether the request fits everywhere.
func (v Verdict) Admitted() bool { return len(v.Excesses) == 0 }

// Governed reports whether a leaf lists the namespace.
func (v Verdict) Governed() bool { return v.Leaf != "" }

// Message explains a refusal for a FailedScheduling event, one clause per
// node, deepest first, resources sorted, e.g.
//
//	exceeded elastic quota "root.a.1": cpu used 20, requested 5, max 20; exceeded elastic quota "root": cpu used 40, requested 5, max 40
//
// It is empty when the request was admitted.
func (v Verdict) Message() string {
	clauses := make([]string, 0, len(v.Excesses))
	for _, excess := range v.Excesses {
		parts := make([]string, 0, len(excess.Resources))
		for _, r := range excess.Resources {
			parts = append(parts, fmt.Sprintf("%s used %s, requested %s, max %s",
				r.Resource, r.Used.String(), r.Requested.String(), r.Max.String()))
		}
		clauses = append(clauses, fmt.Sprintf("exceeded elastic quota %q: %s", excess.Node, strings.Join(parts, "; ")))
	}
	return strings.Join(clauses, "; ")
}

// Reason is the refusal in the cluster autoscaler's reason format, naming the
// most specific failing node and its exceeded resources, e.g.
//
//	exceeded elastic quota: "ElasticQuotaTree/root.a.1", resources: cpu
//
// It is empty when the request was admitted.
func (v Verdict) Reason() string {
	if v.Admitted() {
		return ""
	}
	first := v.Excesses[0]
	names := make([]string, 0, len(first.Resources))
	for _, r := range first.Resources {
		names = append(names, string(r.Resource))
	}
	return fmt.Sprintf("exceeded elastic quota: \"ElasticQuotaTree/%s\", resources: %s", first.Node, strings.Join(names, ", "))
}

// verdict builds the explanation of a refusal; only the refused path
// allocates.
func (u *usage) verdict(leaf int, request resources.Vector) Verdict {
	v := Verdict{Leaf: u.shape.nodes[leaf].name}
	index := u.shape.index
	for pos := leaf; pos >= 0; pos = u.shape.nodes[pos].parent {
		n := &u.shape.nodes[pos]
		used := u.usedAt(pos)
		var exceeded []ResourceExcess
		for dim, r := range request {
			if r > 0 && resources.SaturatingAdd(used[dim], r) > n.max[dim] {
				exceeded = append(exceeded, ResourceExcess{
					Resource:  index.Name(dim),
					Used:      index.Quantity(dim, used[dim]),
					Requested: index.Quantity(dim, r),
					Max:       index.Quantity(dim, n.max[dim]),
				})
			}
		}
		if len(exceeded) > 0 {
			v.Excesses = append(v.Excesses, Excess{Node: n.name, Depth: n.depth, Resources: exceeded})
		}
	}
	return v
}
