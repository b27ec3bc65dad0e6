// Package expander chooses which node group to grow when several could host the
// pending pods. The names and behaviour follow the upstream cluster autoscaler's
// --expander flag so that operators can carry their settings over unchanged.
//
// New chains stages: each one narrows the options and hands the survivors to the
// next. When options are still tied after the last stage, the chain takes the one
// whose node group Id sorts first, unless that last stage is "random". Upstream
// breaks those ties at random; we prefer that the same cluster state always grows
// the same group, so that decisions can be reproduced from logs and tests.
package expander

import (
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cloudprovider"
)

// Option is one way to satisfy pending pods: add NodeCount nodes to NodeGroup.
type Option struct {
	NodeGroup cloudprovider.NodeGroup
	NodeCount int
	// Pods are the pending pods the new nodes would host.
	Pods []*corev1.Pod
	// Template is the group's template node (allocatable is what least-waste measures).
	Template *corev1.Node
	// SimilarNodeGroups are groups balanced with this one (may be empty). No
	// expander looks at them: the choice is about the option's own group, and
	// balancing happens after it.
	SimilarNodeGroups []cloudprovider.NodeGroup
	Debug             string
}

// Strategy picks the best option, or nil when options is empty.
type Strategy interface {
	BestOption(options []Option) *Option
}

// Filter narrows options to the best ones (ties kept), never to none when given some.
type Filter interface {
	BestOptions(options []Option) []Option
}

// Names, as in upstream's --expander flag.
const (
	RandomExpanderName        = "random"
	MostPodsExpanderName      = "most-pods"
	LeastWasteExpanderName    = "least-waste"
	PriorityBasedExpanderName = "priority"
)

// Where the priority expander's configuration lives, as upstream names it, so that
// existing ConfigMaps keep working. The ConfigMap sits in the autoscaler's
// namespace.
const (
	PriorityConfigMapName = "cluster-autoscaler-priority-expander"
	PriorityConfigMapKey  = "priorities"
)

// Deps is what the stages need from the outside world.
type Deps struct {
	// PriorityConfig returns the current priority ConfigMap data (key "priorities") or not found.
	// The autoscaler passes a lister-backed func (see PriorityConfigFromLister);
	// tests pass a static func. It is called on every decision, so it must be cheap.
	PriorityConfig func() (string, bool, error)
	Rand           *rand.Rand // for "random"; nil = seeded from time
}

// groupID tolerates an option without a group, so that one malformed option
// cannot crash the autoscaler loop; it simply sorts first and matches little.
func groupID(o *Option) string {
	if o.NodeGroup == nil {
		return ""
	}
	return o.NodeGroup.Id()
}

// bestIndices returns, in input order, the indices of n options that no other
// option beats. compare(i, j) > 0 means option i beats option j.
func bestIndices(n int, compare func(i, j int) int) []int {
	var best []int
	for i := range n {
		if len(best) == 0 {
			best = append(best, i)
			continue
		}
		switch c := compare(i, best[0]); {
		case c > 0:
			best = append(best[:0], i)
		case c == 0:
			best = append(best, i)
		}
	}
	return best
}

// pick copies the chosen options out, so that no stage aliases its caller's slice.
func pick(options []Option, indices []int) []Option {
	if len(indices) == 0 {
		return nil
	}
	out := make([]Option, len(indices))
	for k, i := range indices {
		out[k] = options[i]
	}
	return out
}
