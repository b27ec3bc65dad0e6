package core

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/daemon"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/scaledown"
)

// Taint key prefixes and keys upstream leaves out of templates made from a
// node: the autoscaler's own taints, node-condition taints (a transient state),
// and startup and status taints, by flag or by prefix.
const (
	IgnoreTaintPrefix  = "ignore-taint.cluster-autoscaler.kubernetes.io/"
	StartupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	StatusTaintPrefix  = "status-taint.cluster-autoscaler.kubernetes.io/"
)

// nodeConditionTaints are the taints the node lifecycle controller and cloud
// controllers set for a node's condition, as upstream lists them.
var nodeConditionTaints = map[string]bool{
	corev1.TaintNodeNotReady: true, corev1.TaintNodeUnreachable: true, corev1.TaintNodeUnschedulable: true,
	corev1.TaintNodeMemoryPressure: true, corev1.TaintNodeDiskPressure: true, corev1.TaintNodeNetworkUnavailable: true,
	corev1.TaintNodePIDPressure: true, "node.cloudprovider.kubernetes.io/uninitialized": true,
	"node.cloudprovider.kubernetes.io/shutdown": true, "cloud.google.com/impending-node-termination": true,
	"NodeWithImpairedVolumes": true,
}

// taintConfig is --startup-taint (and its older name --ignore-taint),
// --startup-taint-prefix and --status-taint.
type taintConfig struct {
	startup, status                 map[string]bool
	startupPrefixes, statusPrefixes []string
}

func newTaintConfig(opts config.Options) taintConfig {
	tc := taintConfig{startup: map[string]bool{}, status: map[string]bool{},
		startupPrefixes: append([]string{IgnoreTaintPrefix, StartupTaintPrefix}, opts.StartupTaintPrefixes...),
		statusPrefixes:  []string{StatusTaintPrefix}}
	for _, k := range append(append([]string(nil), opts.StartupTaints...), opts.IgnoreTaints...) {
		tc.startup[k] = true
	}
	for _, k := range opts.StatusTaints {
		tc.status[k] = true
	}
	return tc
}

func hasAnyPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// sanitize keeps the taints a new node of the group would have.
func (tc taintConfig) sanitize(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		switch {
		case t.Key == scaledown.ToBeDeletedTaint, t.Key == scaledown.DeletionCandidateTaint, nodeConditionTaints[t.Key],
			tc.startup[t.Key], tc.status[t.Key], hasAnyPrefix(t.Key, tc.startupPrefixes), hasAnyPrefix(t.Key, tc.statusPrefixes):
			continue
		}
		out = append(out, t)
	}
	return out
}

// templates builds each group's template as upstream's template provider
// does, for every cloud provider alike. Where the group has a ready node, the
// template is that node (labels and taints, less the taints above) with the
// static, mirror and DaemonSet pods running on it, plus, with --force-ds, the
// DaemonSets that would run there but do not yet. Otherwise it is the provider's
// template with every DaemonSet pod that would run on it.
type templates struct {
	taints   taintConfig
	forceDS  bool
	examples map[string]*corev1.Node
	podsOn   map[string][]*corev1.Pod
	ds       []*appsv1.DaemonSet
}

func newTemplates(tc taintConfig, forceDS bool, nodes []*corev1.Node, groupOf func(*corev1.Node) string,
	bound []*corev1.Pod, daemonsets []*appsv1.DaemonSet) *templates {
	t := &templates{taints: tc, forceDS: forceDS, examples: map[string]*corev1.Node{}, podsOn: map[string][]*corev1.Pod{}, ds: daemonsets}
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, n := range sorted {
		if !goodExample(n) {
			continue
		}
		if id := groupOf(n); id != "" && t.examples[id] == nil {
			t.examples[id] = n
		}
	}
	for _, p := range bound {
		t.podsOn[p.Spec.NodeName] = append(t.podsOn[p.Spec.NodeName], p)
	}
	return t
}

// goodExample: ready, schedulable and not on its way out.
func goodExample(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil || n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == scaledown.ToBeDeletedTaint {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (t *templates) forGroup(ctx context.Context, g cloudprovider.NodeGroup) (*cloudprovider.NodeInfo, error) {
	if ex := t.examples[g.Id()]; ex != nil {
		node := ex.DeepCopy()
		node.Spec.Taints = t.taints.sanitize(node.Spec.Taints)
		var pods []*corev1.Pod
		running := map[types.UID]bool{}
		for _, p := range t.podsOn[ex.Name] {
			if p.DeletionTimestamp != nil {
				continue
			}
			ctrl := metav1.GetControllerOf(p)
			isDS := ctrl != nil && ctrl.Kind == "DaemonSet"
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror || isDS {
				pods = append(pods, p)
			}
			if isDS {
				running[ctrl.UID] = true
			}
		}
		for _, p := range t.daemonPods(ctx, node, running) {
			if t.forceDS || preemptingSystemNodeCritical(p) {
				pods = append(pods, p)
			}
		}
		return &cloudprovider.NodeInfo{Node: node, Pods: pods}, nil
	}
	base, err := g.TemplateNodeInfo()
	if err != nil {
		return nil, err
	}
	return &cloudprovider.NodeInfo{Node: base.Node, Pods: append(append([]*corev1.Pod(nil), base.Pods...), t.daemonPods(ctx, base.Node, nil)...)}, nil
}

// daemonPods are the pods of the DaemonSets, other than those in skip, that
// the DaemonSet controller would run on node: its own decision, by node
// selector, affinity and taints.
func (t *templates) daemonPods(ctx context.Context, node *corev1.Node, skip map[types.UID]bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ds := range t.ds {
		if skip[ds.UID] {
			continue
		}
		if run, _ := daemon.NodeShouldRunDaemonPod(klog.FromContext(ctx), node, ds); !run {
			continue
		}
		p := daemon.NewPod(ds, node.Name)
		p.Namespace = ds.Namespace
		p.Name = fmt.Sprintf("%s-%s", ds.Name, node.Name)
		p.UID = types.UID(fmt.Sprintf("%s-%s", ds.UID, node.Name))
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
		out = append(out, p)
	}
	return out
}

// preemptingSystemNodeCritical DaemonSet pods run on a node whatever its room,
// so upstream counts them without --force-ds.
func preemptingSystemNodeCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-node-critical" &&
		(p.Spec.PreemptionPolicy == nil || *p.Spec.PreemptionPolicy == corev1.PreemptLowerPriority)
}
