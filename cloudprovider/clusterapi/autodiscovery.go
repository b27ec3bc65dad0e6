package clusterapi

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// AutoDiscoveryPrefix starts a --node-group-auto-discovery spec for this
// provider: clusterapi:namespace=NS,clusterName=NAME,KEY=VALUE.
const AutoDiscoveryPrefix = "clusterapi:"

// discoverySpec is one --node-group-auto-discovery spec, as upstream reads
// it: every key is optional, and a scalable resource must match all of them.
type discoverySpec struct {
	namespace   string
	clusterName string
	labels      labels.Selector
}

// parseAutoDiscovery reads --node-group-auto-discovery specs. Upstream's
// format: "clusterapi:" then comma-separated key=value pairs, where namespace
// and clusterName select by namespace and Cluster, and any other key is a
// label the scalable resource must carry with that value.
func parseAutoDiscovery(specs []string) ([]discoverySpec, error) {
	out := make([]discoverySpec, 0, len(specs))
	for _, spec := range specs {
		if spec == "" {
			// --node-group-auto-discovery= (a chart's empty value) selects nothing more.
			continue
		}
		s, err := parseDiscoverySpec(spec)
		if err != nil {
			return nil, fmt.Errorf("--node-group-auto-discovery %q: %w", spec, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseDiscoverySpec(spec string) (discoverySpec, error) {
	s := discoverySpec{labels: labels.Everything()}
	discoverer, args, found := strings.Cut(spec, ":")
	if !found || strings.Contains(args, ":") {
		return s, fmt.Errorf("want clusterapi:key=value,key=value")
	}
	if discoverer != strings.TrimSuffix(AutoDiscoveryPrefix, ":") {
		return s, fmt.Errorf("unsupported discoverer %q: the clusterapi provider takes clusterapi:...", discoverer)
	}
	var requirements []labels.Requirement
	for _, arg := range strings.Split(args, ",") {
		if arg == "" {
			continue
		}
		k, v, ok := strings.Cut(arg, "=")
		if !ok || strings.Contains(v, "=") {
			return s, fmt.Errorf("%q is not key=value", arg)
		}
		switch k {
		case "namespace":
			s.namespace = v
		case "clusterName":
			s.clusterName = v
		default:
			r, err := labels.NewRequirement(k, selection.Equals, []string{v})
			if err != nil {
				return s, fmt.Errorf("label %q: %w", arg, err)
			}
			requirements = append(requirements, *r)
		}
	}
	if len(requirements) > 0 {
		s.labels = labels.NewSelector().Add(requirements...)
	}
	return s, nil
}

func (s discoverySpec) matches(u *unstructured.Unstructured) bool {
	return (s.namespace == "" || s.namespace == u.GetNamespace()) &&
		(s.clusterName == "" || s.clusterName == clusterName(u)) &&
		s.labels.Matches(labels.Set(u.GetLabels()))
}

// allowed says whether a scalable resource is a node group candidate: every
// one when there are no specs, else those that match one of them.
func allowed(specs []discoverySpec, u *unstructured.Unstructured) bool {
	if len(specs) == 0 {
		return true
	}
	for _, s := range specs {
		if s.matches(u) {
			return true
		}
	}
	return false
}

// watchNamespace is the one namespace every spec names, or all namespaces.
func watchNamespace(specs []discoverySpec) string {
	ns := ""
	for i, s := range specs {
		if s.namespace == "" || (i > 0 && s.namespace != ns) {
			return metav1.NamespaceAll
		}
		ns = s.namespace
	}
	return ns
}

// clusterName is spec.clusterName, or the cluster-name label where the kind
// has no such field.
func clusterName(u *unstructured.Unstructured) string {
	if name, found, _ := unstructured.NestedString(u.Object, "spec", "clusterName"); found {
		return name
	}
	return u.GetLabels()[ClusterNameLabel]
}
