// Package nodetemplate is what every Quotascale program agrees on about a node
// group's next node: the taints the autoscaler sets on nodes, which taints a
// new node of the group would not carry, which of the group's nodes is a fair
// example of it, and when a node is on its way out. The autoscaler's core, its
// Cluster API provider and kubectl-quota all build templates with it, so they
// model the same node.
//
// It is a ground-floor package, as upstream's utils/taints: it imports only the
// Kubernetes API types, so that a kubectl plugin can use it without pulling in
// the autoscaler.
package nodetemplate

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The autoscaler's own taints and the taint key prefixes that mark startup
// and status taints, with upstream's names so that existing tolerations and
// node setups keep their meaning.
const (
	// ToBeDeletedTaint (NoSchedule) is set on a node the autoscaler is removing.
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
	// DeletionCandidateTaint (PreferNoSchedule) is set on an unneeded node; its
	// value is when the node was marked, in Unix seconds.
	DeletionCandidateTaint = "DeletionCandidateOfClusterAutoscaler"
	// IgnoreTaintPrefix is the deprecated name of StartupTaintPrefix; it still
	// marks startup taints.
	IgnoreTaintPrefix = "ignore-taint.cluster-autoscaler.kubernetes.io/"
	// StartupTaintPrefix marks a taint a node carries until it has started (a
	// device plugin or CNI agent installing itself).
	StartupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	// StatusTaintPrefix marks a taint that reports a node's status; unlike a
	// startup taint it does not make the node count as unready.
	StatusTaintPrefix = "status-taint.cluster-autoscaler.kubernetes.io/"
)

// nodeConditionTaints are set by the node lifecycle and cloud controllers for
// a node's passing condition, and by two clouds' termination and volume
// handlers: upstream's list. A new node starts without them.
var nodeConditionTaints = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	corev1.TaintNodeUnschedulable:                    true,
	corev1.TaintNodeMemoryPressure:                   true,
	corev1.TaintNodeDiskPressure:                     true,
	corev1.TaintNodeNetworkUnavailable:               true,
	corev1.TaintNodePIDPressure:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	"node.cloudprovider.kubernetes.io/shutdown":      true,
	"cloud.google.com/impending-node-termination":    true,
	"NodeWithImpairedVolumes":                        true,
}

// IsNodeConditionTaint says whether a taint key reports a node's condition
// rather than something its group sets up.
func IsNodeConditionTaint(key string) bool { return nodeConditionTaints[key] }

// TaintConfig names the startup and status taints beyond those marked by
// prefix: --startup-taint (and its older name --ignore-taint),
// --startup-taint-prefix and --status-taint. The zero value knows only the
// prefixes, which is what a program without the autoscaler's flags can know.
type TaintConfig struct {
	startup, status map[string]bool
	startupPrefixes []string
}

// NewTaintConfig is the configuration of the given startup taint keys, extra
// startup taint key prefixes and status taint keys.
func NewTaintConfig(startupTaints, startupPrefixes, statusTaints []string) TaintConfig {
	tc := TaintConfig{startup: map[string]bool{}, status: map[string]bool{},
		startupPrefixes: append([]string(nil), startupPrefixes...)}
	for _, k := range startupTaints {
		tc.startup[k] = true
	}
	for _, k := range statusTaints {
		tc.status[k] = true
	}
	return tc
}

// IsStartupTaint says whether a node loses the taint once it has started.
func (tc TaintConfig) IsStartupTaint(key string) bool {
	return tc.startup[key] || strings.HasPrefix(key, IgnoreTaintPrefix) || strings.HasPrefix(key, StartupTaintPrefix) ||
		hasAnyPrefix(key, tc.startupPrefixes)
}

// IsStatusTaint says whether the taint reports a node's status.
func (tc TaintConfig) IsStatusTaint(key string) bool {
	return tc.status[key] || strings.HasPrefix(key, StatusTaintPrefix)
}

func hasAnyPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// SanitizeTaints keeps the taints a new node of the group would have: it
// leaves out the autoscaler's own taints, node-condition taints (a passing
// state of one node) and startup and status taints. The result is a new
// slice; nil when nothing is kept.
func SanitizeTaints(taints []corev1.Taint, tc TaintConfig) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		switch {
		case t.Key == ToBeDeletedTaint, t.Key == DeletionCandidateTaint, IsNodeConditionTaint(t.Key),
			tc.IsStartupTaint(t.Key), tc.IsStatusTaint(t.Key):
			continue
		}
		out = append(out, t)
	}
	return out
}

// HasTaint says whether the node carries a taint with the key.
func HasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// BeingDeleted says the node carries the ToBeDeleted taint: the autoscaler's
// removal of it is under way.
func BeingDeleted(node *corev1.Node) bool { return HasTaint(node, ToBeDeletedTaint) }
