package core

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/daemon"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
)

// newTaintConfig is --startup-taint (and its older name --ignore-taint),
// --startup-taint-prefix and --status-taint.
func newTaintConfig(opts config.Options) nodetemplate.TaintConfig {
	return nodetemplate.NewTaintConfig(append(append([]string(nil), opts.StartupTaints...), opts.IgnoreTaints...),
		opts.StartupTaintPrefixes, opts.StatusTaints)
}

// templates builds each group's template as upstream's template provider
// does, for every cloud provider alike. Where the group has a good example
// node (nodetemplate.Example), the template is that node, sanitized, with the
// static, mirror and DaemonSet pods running on it, plus, with --force-ds, the
// DaemonSets that would run there but do not yet. Otherwise it is the
// provider's template, its taints sanitized alike, with every DaemonSet pod
// that would run on it; and when the provider cannot describe the group, a
// node of the group that is not a good example, as upstream's last resort.
type templates struct {
	taints  nodetemplate.TaintConfig
	forceDS bool
	// examples are each group's example node, good says which are good ones.
	examples map[string]*corev1.Node
	good     map[string]bool
	podsOn   map[string][]*corev1.Pod
	ds       []*appsv1.DaemonSet
	// slices are the nodes' current node-local ResourceSlices, by node.
	slices map[string][]*resourcev1.ResourceSlice
}

func newTemplates(tc nodetemplate.TaintConfig, forceDS bool, nodes []*corev1.Node, groupOf func(*corev1.Node) string,
	bound []*corev1.Pod, daemonsets []*appsv1.DaemonSet) *templates {
	t := &templates{taints: tc, forceDS: forceDS, examples: map[string]*corev1.Node{}, good: map[string]bool{},
		podsOn: map[string][]*corev1.Pod{}, ds: daemonsets}
	byGroup := map[string][]*corev1.Node{}
	for _, n := range nodes {
		if id := groupOf(n); id != "" {
			byGroup[id] = append(byGroup[id], n)
		}
	}
	for id, members := range byGroup {
		t.examples[id], t.good[id] = nodetemplate.Example(members)
	}
	for _, p := range bound {
		t.podsOn[p.Spec.NodeName] = append(t.podsOn[p.Spec.NodeName], p)
	}
	return t
}

func (t *templates) forGroup(ctx context.Context, g cloudprovider.NodeGroup) (*cloudprovider.NodeInfo, error) {
	ex := t.examples[g.Id()]
	if ex != nil && t.good[g.Id()] {
		return t.fromExample(ctx, ex), nil
	}
	base, err := g.TemplateNodeInfo()
	if errors.Is(err, cloudprovider.ErrNotImplemented) && ex != nil {
		klog.FromContext(ctx).Info("Template built from a node that is not ready or not schedulable", "nodeGroup", g.Id(), "node", ex.Name)
		return t.fromExample(ctx, ex), nil
	}
	if err != nil {
		return nil, err
	}
	node := base.Node.DeepCopy()
	node.Spec.Taints = nodetemplate.SanitizeTaints(node.Spec.Taints, t.taints)
	return &cloudprovider.NodeInfo{Node: node, Pods: append(append([]*corev1.Pod(nil), base.Pods...), t.daemonPods(ctx, node, nil)...),
		ResourceSlices: base.ResourceSlices}, nil
}

// fromExample is the template made from a node of the group. It keeps the
// node's name, for logs: each simulated copy gets a name of its own
// (templateNode).
func (t *templates) fromExample(ctx context.Context, ex *corev1.Node) *cloudprovider.NodeInfo {
	node := nodetemplate.FromNode(ex, ex.Name, t.taints)
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
	return &cloudprovider.NodeInfo{Node: node, Pods: pods, ResourceSlices: nodetemplate.ResourceSlicesFor(t.slices[ex.Name], ex.Name, node.Name)}
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
