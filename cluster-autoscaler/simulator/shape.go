package simulator

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// shapeFilters are the in-tree Filter plugins whose answer for a pod without
// spec.nodeName depends only on what NodeShape keeps of a node: its
// allocatable and requested resources, pod count, used host ports, taints and
// spec.unschedulable. None reads a label, the name or another node.
var shapeFilters = sets.New(names.NodeResourcesFit, names.NodeUnschedulable, names.TaintToleration, names.NodePorts, names.NodeName)

// shapeOnly reports whether every Filter plugin the pod's PreFilter did not
// skip is one of shapeFilters, or InterPodAffinity for a pod whose required
// terms are all scoped to the node (kubernetes.io/hostname): a new node is a
// domain of its own, which no pod of the cluster shares. Two new nodes of the
// same NodeShape then get the same answer, whatever their names and labels,
// as long as the cluster's own required anti-affinity is scoped to nodes too
// (HostScopedAntiAffinity). A pod asking for a resource other than cpu,
// memory and ephemeral storage is left out: NodeResourcesFit may then ask the
// node's DRA devices, which are per node.
func shapeOnly(filters []string, skipped sets.Set[string], pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return false
	}
	for _, name := range filters {
		if skipped.Has(name) || shapeFilters.Has(name) || name == names.InterPodAffinity && hostScoped(pod) {
			continue
		}
		return false
	}
	standard := func(rl corev1.ResourceList) bool {
		for name := range rl {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
				return false
			}
		}
		return true
	}
	containers := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		if !standard(c.Resources.Requests) || !standard(c.Resources.Limits) {
			return false
		}
	}
	if pod.Spec.Resources != nil && (!standard(pod.Spec.Resources.Requests) || !standard(pod.Spec.Resources.Limits)) {
		return false
	}
	return standard(pod.Spec.Overhead) && len(pod.Spec.ResourceClaims) == 0
}

// NodeShape is what the Filter plugins of a ShapeOnly check read of a new node,
// as a string: nodes of equal shape take the same such pods, in any order.
// Node groups that differ only in labels have templates of one shape, so an
// estimate for one holds for the others.
func NodeShape(info fwk.NodeInfo) string {
	var b strings.Builder
	writeResource := func(r fwk.Resource) {
		b.WriteString(strconv.FormatInt(r.GetMilliCPU(), 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(r.GetMemory(), 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(r.GetEphemeralStorage(), 10))
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(r.GetAllowedPodNumber()))
		scalar := r.GetScalarResources()
		keys := make([]string, 0, len(scalar))
		for name := range scalar {
			keys = append(keys, string(name))
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteByte(',')
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(strconv.FormatInt(scalar[corev1.ResourceName(k)], 10))
		}
		b.WriteByte(';')
	}
	writeResource(info.GetAllocatable())
	writeResource(info.GetRequested())
	writeResource(info.GetNonZeroRequested())
	b.WriteString(strconv.Itoa(len(info.GetPods())))
	b.WriteByte(';')
	ports := info.GetUsedPorts()
	var used []string
	for ip, byPort := range ports {
		for pp := range byPort {
			used = append(used, ip+"/"+pp.Protocol+"/"+strconv.Itoa(int(pp.Port)))
		}
	}
	sort.Strings(used)
	b.WriteString(strings.Join(used, ","))
	b.WriteByte(';')
	node := info.Node()
	b.WriteString(strconv.FormatBool(node.Spec.Unschedulable))
	for _, t := range node.Spec.Taints {
		b.WriteByte(';')
		b.WriteString(t.Key)
		b.WriteByte('=')
		b.WriteString(t.Value)
		b.WriteByte(':')
		b.WriteString(string(t.Effect))
	}
	return b.String()
}

// hostScoped reports whether every required (anti-)affinity term of pod has
// kubernetes.io/hostname as its topology key.
func hostScoped(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return true
	}
	scoped := func(terms []corev1.PodAffinityTerm) bool {
		for _, t := range terms {
			if t.TopologyKey != corev1.LabelHostname {
				return false
			}
		}
		return true
	}
	return (a.PodAffinity == nil || scoped(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)) &&
		(a.PodAntiAffinity == nil || scoped(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution))
}

// HostScopedAntiAffinity reports whether every pod of the snapshot with
// required anti-affinity scopes all of it to its node, so that it keeps no
// pod off a new node.
func (s *Snapshot) HostScopedAntiAffinity() bool {
	for _, n := range s.lists().withRequiredAntiAffinity {
		for _, p := range n.GetPodsWithRequiredAntiAffinity() {
			for _, t := range p.GetRequiredAntiAffinityTerms() {
				if t.TopologyKey != corev1.LabelHostname {
					return false
				}
			}
		}
	}
	return true
}
