package core

import (
	"encoding/json"
	"hash/fnv"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotascale/quotascale/cluster-autoscaler/simulator"
)

// podGroup is a set of pending pods the scheduler would treat alike: same
// controller, same scheduling-relevant spec. One PreFilter run and one Filter run
// per node serve them all.
type podGroup struct {
	id    int
	pods  []*corev1.Pod
	check *simulator.PodCheck
	// gang is the gang whose pods these are, when they scale up together.
	gang *gangUnit
	// pastOf is the gang whose members past its unit these are: pods like
	// any other once the unit is placed, and placed after it.
	pastOf *gangUnit
}

func (g *podGroup) sample() *corev1.Pod { return g.pods[0] }

// schedulingKey is what makes two pods equivalent for the scheduler: their
// controller and every spec field a plugin reads.
type schedulingKey struct {
	Controller        types.UID
	Namespace         string
	Labels            map[string]string
	Containers        []corev1.ResourceRequirements
	InitContainers    []corev1.ResourceRequirements
	Overhead          corev1.ResourceList
	Resources         *corev1.ResourceRequirements
	NodeSelector      map[string]string
	Affinity          *corev1.Affinity
	Tolerations       []corev1.Toleration
	TopologySpread    []corev1.TopologySpreadConstraint
	PriorityClassName string
	Priority          *int32
	SchedulerName     string
	Volumes           []corev1.Volume
	HostPorts         []corev1.ContainerPort
	// SchedulingGroup names the pod's gang: pods of two gangs are never
	// equivalent, whose nodes are decided gang by gang.
	SchedulingGroup *corev1.PodSchedulingGroup
	// ResourceClaims and the claims made for them from templates: pods
	// with claims of their own are never equivalent, as the simulation
	// allocates each pod's claims; pods sharing a claim are.
	ResourceClaims []corev1.PodResourceClaim
	ClaimStatuses  []corev1.PodResourceClaimStatus
}

func keyOf(pod *corev1.Pod) uint64 {
	k := schedulingKey{
		Namespace:         pod.Namespace,
		Labels:            pod.Labels,
		Overhead:          pod.Spec.Overhead,
		Resources:         pod.Spec.Resources,
		NodeSelector:      pod.Spec.NodeSelector,
		Affinity:          pod.Spec.Affinity,
		Tolerations:       pod.Spec.Tolerations,
		TopologySpread:    pod.Spec.TopologySpreadConstraints,
		PriorityClassName: pod.Spec.PriorityClassName,
		Priority:          pod.Spec.Priority,
		SchedulerName:     pod.Spec.SchedulerName,
		Volumes:           pod.Spec.Volumes,
		SchedulingGroup:   pod.Spec.SchedulingGroup,
		ResourceClaims:    pod.Spec.ResourceClaims,
		ClaimStatuses:     pod.Status.ResourceClaimStatuses,
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		k.Controller = ref.UID
	} else {
		// A bare pod is only equivalent to itself.
		k.Controller = pod.UID
	}
	for _, c := range pod.Spec.Containers {
		k.Containers = append(k.Containers, c.Resources)
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				k.HostPorts = append(k.HostPorts, p)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		k.InitContainers = append(k.InitContainers, c.Resources)
	}
	raw, _ := json.Marshal(k)
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return h.Sum64()
}

// groupPods splits pods into equivalence groups, ordered by their first pod's
// namespace/name so that every loop walks them the same way.
func groupPods(pods []*corev1.Pod) []*podGroup {
	byKey := map[uint64]*podGroup{}
	var groups []*podGroup
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	for _, p := range sorted {
		k := keyOf(p)
		g, ok := byKey[k]
		if !ok {
			g = &podGroup{id: len(groups)}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.pods = append(g.pods, p)
	}
	return groups
}
