package scaledown

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/quotascale/quotascale/quota/resources"
)

// Annotations shared with upstream, so existing workloads keep their
// meaning.
const (
	SafeToEvictAnnotation       = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// SafeToEvictLocalVolumesAnnotation lists, comma-separated, the pod's local
	// volumes whose loss does not keep the node.
	SafeToEvictLocalVolumesAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
)

// podKind sorts a node's pods: some are ignored, some block the node's removal,
// the rest must move.
type podKind int

const (
	podMoves podKind = iota
	podIgnored
	podBlocks
)

// Reasons a pod keeps its node, as upstream names them.
const (
	reasonNotSafeToEvict   = "NotSafeToEvictAnnotation"
	reasonNotReplicated    = "NotReplicated"
	reasonMinReplicas      = "MinReplicasReached"
	reasonNoController     = "ControllerNotFound"
	reasonLocalStorage     = "LocalStorageRequested"
	reasonSystemPod        = "UnmovableKubeSystemPod"
	reasonPDB              = "NotEnoughPdb"
	reasonNoPlace          = "NoPlaceToMovePods"
	reasonMinSize          = "NodeGroupMinSizeReached"
	reasonMinResources     = "MinimalResourceLimitExceeded"
	reasonRootMin          = "ElasticQuotaTreeRootMin"
	reasonScaleDownOff     = "ScaleDownDisabledAnnotation"
	reasonNotUnderutilized = "NotUnderutilized"
	// reasonRecentlyUnremovable: found unremovable less than
	// --unremovable-node-recheck-timeout ago.
	reasonRecentlyUnremovable = "RecentlyUnremovable"
	reasonUnreadyOff          = "ScaleDownUnreadyDisabled"
)

// IsExpendable is upstream's expendable pod: a priority below
// --expendable-pods-priority-cutoff. Such a pod triggers no scale-up, keeps no
// node, and is not moved when its node goes.
func IsExpendable(p *corev1.Pod, cutoff int) bool {
	return int(corev1helpers.PodPriority(p)) < cutoff
}

// classify decides what a pod means for its node's removal at now.
func classify(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, controllers *Controllers, opts Options, now time.Time) (podKind, string) {
	if resources.PodFinished(pod) || pod.DeletionTimestamp != nil {
		return podIgnored, ""
	}
	if isMirrorPod(pod) || isDaemonSetPod(pod) {
		return podIgnored, ""
	}
	if IsExpendable(pod, opts.ExpendablePodsPriorityCutoff) {
		return podIgnored, ""
	}
	ctrl := metav1.GetControllerOf(pod)
	// As upstream, the replica count is judged before any annotation: even a
	// pod marked safe to evict keeps its node while its ReplicaSet is below
	// --min-replica-count or gone. Upstream judges it only with
	// --skip-nodes-with-custom-controller-pods.
	if opts.SkipNodesWithCustomControllerPods && ctrl != nil && controllers != nil {
		if reason := controllers.replicaReason(pod.Namespace, ctrl, opts.MinReplicaCount); reason != "" {
			return podBlocks, reason
		}
	}
	if pdb := blockingPDB(pod, pdbs); pdb != nil {
		return podBlocks, reasonPDB
	}
	switch pod.Annotations[SafeToEvictAnnotation] {
	case "true":
		return podMoves, ""
	case "false":
		return podBlocks, reasonNotSafeToEvict
	}
	if ctrl == nil || (opts.SkipNodesWithCustomControllerPods && !builtInControllers[ctrl.Kind]) {
		return podBlocks, reasonNotReplicated
	}
	if opts.SkipNodesWithLocalStorage && hasLocalStorage(pod) {
		return podBlocks, reasonLocalStorage
	}
	// As upstream, such a pod blocks its node only for
	// --blocking-system-pod-distruption-timeout after it was created.
	if opts.SkipNodesWithSystemPods && pod.Namespace == metav1.NamespaceSystem && !coveredByPDB(pod, pdbs) &&
		(pod.CreationTimestamp.IsZero() || !now.After(pod.CreationTimestamp.Add(opts.BlockingSystemPodTimeout))) {
		return podBlocks, reasonSystemPod
	}
	return podMoves, ""
}

func isMirrorPod(pod *corev1.Pod) bool {
	_, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return mirror
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	ctrl := metav1.GetControllerOf(pod)
	return ctrl != nil && ctrl.Kind == "DaemonSet"
}

// Controllers look up the ReplicaSets and ReplicationControllers that own
// pods, for --min-replica-count.
type Controllers struct {
	ReplicaSets            appslisters.ReplicaSetLister
	ReplicationControllers corelisters.ReplicationControllerLister
}

// replicaReason is why the pod's ReplicaSet or ReplicationController keeps
// its node: it is gone (ControllerNotFound), or it asks for fewer than min
// replicas (MinReplicasReached). Empty when neither holds or the controller is
// of another kind.
func (c *Controllers) replicaReason(namespace string, ctrl *metav1.OwnerReference, min int) string {
	var replicas *int32
	switch ctrl.Kind {
	case "ReplicaSet":
		rs, err := c.ReplicaSets.ReplicaSets(namespace).Get(ctrl.Name)
		if err != nil {
			return reasonNoController
		}
		replicas = rs.Spec.Replicas
	case "ReplicationController":
		rc, err := c.ReplicationControllers.ReplicationControllers(namespace).Get(ctrl.Name)
		if err != nil {
			return reasonNoController
		}
		replicas = rc.Spec.Replicas
	default:
		return ""
	}
	if replicas != nil && int(*replicas) < min {
		return reasonMinReplicas
	}
	return ""
}

// builtInControllers are the controllers upstream trusts to recreate a pod
// elsewhere when --skip-nodes-with-custom-controller-pods is on (a Deployment's
// pods belong to its ReplicaSet).
var builtInControllers = map[string]bool{"ReplicationController": true, "ReplicaSet": true, "Job": true, "StatefulSet": true, "DaemonSet": true}

// hasLocalStorage: the pod uses an emptyDir on disk or a hostPath volume that
// its SafeToEvictLocalVolumesAnnotation does not name.
func hasLocalStorage(pod *corev1.Pod) bool {
	safe := map[string]bool{}
	for _, name := range strings.Split(pod.Annotations[SafeToEvictLocalVolumesAnnotation], ",") {
		safe[strings.TrimSpace(name)] = true
	}
	for _, v := range pod.Spec.Volumes {
		if safe[v.Name] {
			continue
		}
		if v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory) {
			return true
		}
	}
	return false
}

// blockingPDB is a budget covering pod that allows no more disruptions.
func blockingPDB(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
	for _, pdb := range matchingPDBs(pod, pdbs) {
		if pdb.Status.DisruptionsAllowed < 1 {
			return pdb
		}
	}
	return nil
}

func coveredByPDB(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) bool {
	return len(matchingPDBs(pod, pdbs)) > 0
}

func matchingPDBs(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out
}
