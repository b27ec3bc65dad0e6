package gang

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
)

// ACK's gang labels.
const (
	LabelName         = "pod-group.scheduling.sigs.k8s.io/name"
	LabelMinAvailable = "pod-group.scheduling.sigs.k8s.io/min-available"
)

// Kind is where a pod's gang membership comes from.
type Kind string

const (
	// KindPodGroup is a Workload API PodGroup named by the pod's
	// spec.schedulingGroup.podGroupName.
	KindPodGroup Kind = "PodGroup"
	// KindLabels is ACK's pair of pod labels.
	KindLabels Kind = "Labels"
)

// Key identifies a gang. Gangs are namespaced: a PodGroup, like the pods
// naming it, lives in one namespace, and ACK's labels are read the same way.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String is the gang's namespace/name, as events and logs name it.
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Gang is a gang and the number of its pods that must run together.
type Gang struct {
	Key      Key
	MinCount int32
}

// ErrPodGroupNotFound is wrapped by Of when a pod names a PodGroup that does
// not exist (yet): the scheduler keeps such a pod waiting.
var ErrPodGroupNotFound = errors.New("PodGroup not found")

// ErrInvalidMinAvailable is wrapped by Of when ACK's min-available label is
// missing, not a number, or not positive.
var ErrInvalidMinAvailable = errors.New("invalid " + LabelMinAvailable)

// RefOf says which gang a pod names, without looking anything up. A pod that
// names a PodGroup belongs to it even if it also carries ACK's labels: the
// PodGroup is what kube-scheduler's own gang scheduling holds the pod for.
func RefOf(pod *corev1.Pod) (Key, bool) {
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		return Key{Kind: KindPodGroup, Namespace: pod.Namespace, Name: *sg.PodGroupName}, true
	}
	if name := pod.Labels[LabelName]; name != "" {
		return Key{Kind: KindLabels, Namespace: pod.Namespace, Name: name}, true
	}
	return Key{}, false
}

// FromPodGroup reads a PodGroup's gang policy. A PodGroup with the basic
// policy is not a gang: its pods are scheduled one by one.
func FromPodGroup(pg *schedulingv1beta1.PodGroup) (Gang, bool, error) {
	policy := pg.Spec.SchedulingPolicy.Gang
	if policy == nil {
		return Gang{}, false, nil
	}
	key := Key{Kind: KindPodGroup, Namespace: pg.Namespace, Name: pg.Name}
	if policy.MinCount < 1 {
		return Gang{}, false, fmt.Errorf("PodGroup %s: gang minCount %d is not positive", key, policy.MinCount)
	}
	return Gang{Key: key, MinCount: policy.MinCount}, true, nil
}

// Of resolves the gang a pod belongs to. It reports false with no error for a
// pod in no gang, and for a pod whose PodGroup has the basic policy. podGroup
// looks a PodGroup up by namespace and name; it may be nil where the Workload
// API is not served, and then a pod naming a PodGroup gets ErrPodGroupNotFound.
func Of(pod *corev1.Pod, podGroup func(namespace, name string) (*schedulingv1beta1.PodGroup, bool)) (Gang, bool, error) {
	key, ok := RefOf(pod)
	if !ok {
		return Gang{}, false, nil
	}
	if key.Kind == KindLabels {
		count, err := parseMinAvailable(pod.Labels[LabelMinAvailable])
		if err != nil {
			return Gang{}, false, fmt.Errorf("pod %s/%s of gang %s: %w", pod.Namespace, pod.Name, key, err)
		}
		return Gang{Key: key, MinCount: count}, true, nil
	}
	var pg *schedulingv1beta1.PodGroup
	if podGroup != nil {
		pg, ok = podGroup(key.Namespace, key.Name)
	}
	if pg == nil || !ok {
		return Gang{}, false, fmt.Errorf("pod %s/%s names PodGroup %s: %w", pod.Namespace, pod.Name, key, ErrPodGroupNotFound)
	}
	g, isGang, err := FromPodGroup(pg)
	if err != nil {
		return Gang{}, false, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return g, isGang, nil
}

func parseMinAvailable(value string) (int32, error) {
	if value == "" {
		return 0, fmt.Errorf("%w: the label is missing", ErrInvalidMinAvailable)
	}
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a whole number", ErrInvalidMinAvailable, value)
	}
	if n < 1 {
		return 0, fmt.Errorf("%w: %d is not positive", ErrInvalidMinAvailable, n)
	}
	return int32(n), nil
}
