package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/quota/capacity"
	"github.com/quotascale/quotascale/quota/resources"
)

// nodeGroup is a node group from the autoscaler's status with its registered
// nodes as kubectl-quota can find them.
type nodeGroup struct {
	status NodeGroupStatus
	nodes  []*corev1.Node
	// template stands for the group's next node, made from the node the
	// autoscaler makes it from (nodetemplate.Example) and named after it; nil
	// when no node of the group could be found. When none of the nodes is a
	// good example, the autoscaler prefers its cloud provider's template,
	// which kubectl-quota cannot read, and the node is only the closest guess.
	template *corev1.Node
	// registered and upcoming are recounted against the nodes listed now, so a
	// node that registered after the autoscaler wrote its status is not counted
	// twice (once as a node, once as upcoming). upcoming is counted as the
	// autoscaler counts it (capacity.UpcomingNodes).
	registered, upcoming int
}

// groupLabels are node labels that name a node's group, per provider. The kwok
// provider's comes first; the others are the managed clouds' node pool labels,
// which their autoscalers use as group names.
var groupLabels = []string{
	"quotascale.io/node-group",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"kubernetes.azure.com/agentpool",
	"cluster.x-k8s.io/deployment-name",
}

// Cluster API sets these annotations on the nodes of its machines.
const (
	capiOwnerKind = "cluster.x-k8s.io/owner-kind"
	capiOwnerName = "cluster.x-k8s.io/owner-name"
	capiNamespace = "cluster.x-k8s.io/cluster-namespace"
)

// inGroup says whether node belongs to the group named id. Cluster API groups
// are named Kind/namespace/name by the clusterapi provider; a MachineDeployment's
// nodes are owned by its MachineSets, named after it.
func inGroup(node *corev1.Node, id string) bool {
	for _, key := range groupLabels {
		if v, ok := node.Labels[key]; ok && v == id {
			return true
		}
	}
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return false
	}
	kind, namespace, name := parts[0], parts[1], parts[2]
	a := node.Annotations
	if ns, ok := a[capiNamespace]; ok && ns != namespace {
		return false
	}
	switch kind {
	case "MachineDeployment":
		return node.Labels["cluster.x-k8s.io/deployment-name"] == name ||
			(a[capiOwnerKind] == "MachineSet" && strings.HasPrefix(a[capiOwnerName], name+"-"))
	default:
		return a[capiOwnerKind] == kind && a[capiOwnerName] == name
	}
}

// nodeGroups pairs the autoscaler's groups with their nodes, sorted by name.
func nodeGroups(status *AutoscalerStatus, nodes []*corev1.Node) []*nodeGroup {
	if status == nil {
		return nil
	}
	var out []*nodeGroup
	for _, st := range status.NodeGroups {
		g := &nodeGroup{status: st, registered: st.Registered}
		for _, n := range nodes {
			if n != nil && inGroup(n, st.Name) {
				g.nodes = append(g.nodes, n)
			}
		}
		if example, _ := nodetemplate.Example(g.nodes); example != nil {
			g.registered = len(g.nodes)
			g.template = nodetemplate.FromNode(example, example.Name, nodetemplate.TaintConfig{})
			// kubectl-quota does not model --scale-from-unschedulable; a
			// cordoned example says nothing about the group's next node.
			g.template.Spec.Unschedulable = false
		}
		// An instance the status counted as unregistered that has registered
		// since is counted once, as a node.
		unregistered := max(0, st.Unregistered-max(0, g.registered-st.Registered))
		g.upcoming = capacity.UpcomingNodes(st.Target, g.registered, unregistered)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *nodeGroup) int { return strings.Compare(a.status.Name, b.status.Name) })
	return out
}

// quotaSet is the CapacityQuotas charged as the autoscaler charges them: every
// registered node, plus each group's upcoming nodes shaped like its template.
// unknown names the groups with upcoming nodes and no template to count them by.
func quotaSet(quotas []*autoscalingv1beta1.CapacityQuota, nodes []*corev1.Node, groups []*nodeGroup) (set *capacity.Set, unknown []string) {
	set = capacity.Build(quotas, capacity.Options{})
	for _, n := range nodes {
		set.AddNode(n)
	}
	for _, g := range groups {
		switch {
		case g.upcoming > 0 && g.template != nil:
			set.SetUpcoming(g.status.Name, g.upcoming, g.template)
		case g.upcoming > 0:
			unknown = append(unknown, g.status.Name)
		}
	}
	return set, unknown
}

// canHost says whether a node like template could run pod: its node selector and
// required node affinity match, it tolerates the NoSchedule and NoExecute
// taints, and it requests no more than a node allocates. The scheduler's other
// filters (ports, volumes, topology spread...) are not simulated.
func canHost(pod *corev1.Pod, requests corev1.ResourceList, template *corev1.Node) (bool, string) {
	if match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(template); err != nil {
		return false, fmt.Sprintf("the pod's node affinity is invalid: %v", err)
	} else if !match {
		return false, "node selector or required node affinity does not match its labels"
	}
	noScheduleOrExecute := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if taint, found := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), template.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, true); found {
		return false, fmt.Sprintf("taint %s is not tolerated", taint.ToString())
	}
	index := resources.IndexOf(requests)
	request, allocatable := index.Requests(requests), index.Requests(template.Status.Allocatable)
	if over := resources.Exceeded(index, index.Zero(), request, allocatable); len(over) > 0 {
		var parts []string
		for _, name := range over {
			pos, _ := index.Position(name)
			parts = append(parts, fmt.Sprintf("%s %s > %s", name, index.Format(pos, request[pos]), index.Format(pos, allocatable[pos])))
		}
		return false, "requests more than a node allocates: " + strings.Join(parts, ", ")
	}
	return true, ""
}

// perNode is what one more node like template adds to quota, in the library's
// units (cpu in whole cores, as the autoscaler counts it).
func perNode(quota *autoscalingv1beta1.CapacityQuota, template *corev1.Node) corev1.ResourceList {
	probe := capacity.Build([]*autoscalingv1beta1.CapacityQuota{quota}, capacity.Options{})
	probe.SetUpcoming("probe", 1, template)
	st, _ := probe.Quota(quota.Name)
	return st.Upcoming
}

// refusal is one binding limit of a group's next node, in the numbers the
// autoscaler compares: `CapacityQuota "q" on cpu (used 8 + upcoming 0 + 2 per
// node > limit 8)`.
func refusal(set *capacity.Set, quota *autoscalingv1beta1.CapacityQuota, name corev1.ResourceName, template *corev1.Node) string {
	st, _ := set.Quota(quota.Name)
	used, upcoming := st.Used[name], st.Upcoming[name]
	per := perNode(quota, template)[name]
	limit := quota.Spec.Limits.Resources[autoscalingv1beta1.ResourceName(name)]
	return fmt.Sprintf("CapacityQuota %q on %s (used %s + upcoming %s + %s per node > limit %s)",
		quota.Name, name, used.String(), upcoming.String(), per.String(), limit.String())
}

// headroom is limit - used - upcoming, never negative, in the library's units.
func headroom(name corev1.ResourceName, limit, used, upcoming corev1.ResourceList) string {
	l := resources.Units(name, limit[name])
	taken := resources.SaturatingAdd(resources.Units(name, used[name]), resources.Units(name, upcoming[name]))
	return resources.Format(name, resources.FlooredSub(l, taken))
}
