package elastic

import (
	"fmt"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// InForce is the tree the scheduler enforces among trees: the oldest in
// kube-system, ties broken by name. Nil when there is none. The scheduler, the
// autoscaler and kubectl-quota all choose with it, so they never disagree on
// which tree governs.
func InForce(trees []*schedulingv1beta1.ElasticQuotaTree) *schedulingv1beta1.ElasticQuotaTree {
	var chosen *schedulingv1beta1.ElasticQuotaTree
	for _, t := range trees {
		if t == nil || t.Namespace != schedulingv1beta1.EnforcedNamespace {
			continue
		}
		if chosen == nil || OlderFirst(t, chosen) {
			chosen = t
		}
	}
	return chosen
}

// OlderFirst orders trees by creation time, then namespace and name.
func OlderFirst(a, b *schedulingv1beta1.ElasticQuotaTree) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Enforced is the generation of a tree object that is in force.
type Enforced struct {
	// Tree is that generation's model, with no usage yet.
	Tree *Tree
	// Generation is the metadata.generation of the enforced spec.
	Generation int64
	// Spec is the enforced spec, for status.lastValid.
	Spec *schedulingv1beta1.ElasticQuotaTreeSpec
	// Current reports whether the enforced generation is the object's own spec;
	// false when an invalid spec leaves an earlier generation in force.
	Current bool
}

// LastValid chooses which generation of obj is enforced: its spec when valid;
// otherwise the newer of remembered (a generation of this same object the
// caller saw valid, nil if none) and status.lastValid, as long as it still
// builds. The scheduler, the autoscaler and kubectl-quota all choose with it,
// so an invalid generation leaves the same tree in force in all three, across
// restarts.
//
// err is the spec's own validation error (wrapping *ValidationError), nil when
// the spec is valid. Enforced.Tree is nil when no generation is valid.
func LastValid(obj *schedulingv1beta1.ElasticQuotaTree, remembered *schedulingv1beta1.TreeGeneration) (Enforced, error) {
	tree, err := Build(obj)
	if err == nil {
		return Enforced{Tree: tree, Generation: obj.Generation, Spec: &obj.Spec, Current: true}, nil
	}
	candidate := obj.Status.LastValid
	if remembered != nil && (candidate == nil || remembered.Generation > candidate.Generation) {
		candidate = remembered
	}
	if candidate == nil || candidate.Generation >= obj.Generation {
		// A "last valid" generation that is not older than the spec cannot
		// be one this spec replaced.
		return Enforced{}, err
	}
	earlier := &schedulingv1beta1.ElasticQuotaTree{ObjectMeta: obj.ObjectMeta, Spec: candidate.Spec}
	earlier.Generation = candidate.Generation
	previous, buildErr := Build(earlier)
	if buildErr != nil {
		return Enforced{}, fmt.Errorf("%w; the last valid generation %d does not build either: %w", err, candidate.Generation, buildErr)
	}
	return Enforced{Tree: previous, Generation: candidate.Generation, Spec: &candidate.Spec}, err
}
