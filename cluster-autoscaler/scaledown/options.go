package scaledown

import (
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// evictionRetryInterval is the wait between attempts to evict a pod, as
// upstream's.
const evictionRetryInterval = 10 * time.Second

// Options are upstream's scale-down flags.
type Options struct {
	Enabled                   bool
	UtilizationThreshold      float64
	UnneededTime              time.Duration
	MaxEmptyBulkDelete        int
	SkipNodesWithLocalStorage bool
	SkipNodesWithSystemPods   bool
	// SkipNodesWithCustomControllerPods keeps nodes with pods whose controller
	// is not one of Kubernetes' own workload controllers.
	SkipNodesWithCustomControllerPods bool
	// IgnoreDaemonSetsUtilization leaves DaemonSet pods out of utilization.
	IgnoreDaemonSetsUtilization bool
	// MinReplicaCount: the pods of a ReplicaSet or ReplicationController
	// asking for fewer replicas keep their node.
	MinReplicaCount int
	// UnreadyEnabled allows removing unready nodes, after UnreadyTime.
	UnreadyEnabled bool
	UnreadyTime    time.Duration
	// NonEmptyCandidates caps the nodes with pods to move whose removal is
	// simulated in one loop (0 or less: no cap); MaxParallelism the nodes
	// removed in one loop, MaxDrainParallelism those among them drained.
	NonEmptyCandidates  int
	MaxParallelism      int
	MaxDrainParallelism int
	// ExpendablePodsPriorityCutoff: pods of a lower priority keep no node
	// and are not moved, as upstream's expendable pods.
	ExpendablePodsPriorityCutoff int
	// MinCores and MinMemory (bytes) are the minimums of --cores-total and
	// --memory-total.
	MinCores  int64
	MinMemory int64
	// GPUUtilizationThreshold is the threshold of nodes with a GPU, whose
	// utilization is their GPU's alone, as upstream's.
	GPUUtilizationThreshold float64
	// IgnoreMirrorPodsUtilization leaves mirror pods out of utilization.
	IgnoreMirrorPodsUtilization bool
	// BlockingSystemPodTimeout is how long a kube-system pod that no
	// PodDisruptionBudget covers blocks its node after it was created.
	BlockingSystemPodTimeout time.Duration
	// UnremovableRecheckTimeout is how long a node found unremovable (a pod
	// that cannot move, or no place for its pods) is not checked again.
	UnremovableRecheckTimeout time.Duration
	// SimulationTimeout bounds the checks of where candidates' pods would go;
	// the candidates left are not unneeded this loop.
	SimulationTimeout time.Duration
	// DeletionCandidateTTL, when positive, takes unneeded times from the
	// DeletionCandidateOfClusterAutoscaler taints younger than it at the
	// first loop, so that a restart does not start them over.
	DeletionCandidateTTL time.Duration
}

// PlannerOptions are the planner's options from the autoscaler's. The delays
// after a scale-up, a deletion or a failure are the loop's to apply (core),
// not the planner's.
func PlannerOptions(opts config.Options) Options {
	return Options{
		Enabled:                           opts.ScaleDownEnabled,
		UtilizationThreshold:              opts.ScaleDownUtilizationThreshold,
		UnneededTime:                      opts.ScaleDownUnneededTime,
		MaxEmptyBulkDelete:                opts.MaxEmptyBulkDelete,
		SkipNodesWithLocalStorage:         opts.SkipNodesWithLocalStorage,
		SkipNodesWithSystemPods:           opts.SkipNodesWithSystemPods,
		ExpendablePodsPriorityCutoff:      opts.ExpendablePodsPriorityCutoff,
		SkipNodesWithCustomControllerPods: opts.SkipNodesWithCustomControllerPods,
		IgnoreDaemonSetsUtilization:       opts.IgnoreDaemonSetsUtilization,
		MinReplicaCount:                   opts.MinReplicaCount,
		UnreadyEnabled:                    opts.ScaleDownUnreadyEnabled,
		UnreadyTime:                       opts.ScaleDownUnreadyTime,
		NonEmptyCandidates:                opts.ScaleDownNonEmptyCandidatesCount,
		MaxParallelism:                    opts.MaxScaleDownParallelism,
		MaxDrainParallelism:               opts.MaxDrainParallelism,
		MinCores:                          opts.MinCoresTotal,
		MinMemory:                         opts.MinMemoryTotal,
		GPUUtilizationThreshold:           opts.ScaleDownGPUUtilizationThreshold,
		IgnoreMirrorPodsUtilization:       opts.IgnoreMirrorPodsUtilization,
		BlockingSystemPodTimeout:          opts.BlockingSystemPodDisruptionTimeout,
		UnremovableRecheckTimeout:         opts.UnremovableNodeRecheckTimeout,
		SimulationTimeout:                 opts.ScaleDownSimulationTimeout,
		DeletionCandidateTTL:              opts.NodeDeletionCandidateTTL,
	}
}

// NewActuator builds the actuator from the autoscaler's options; evicted
// counts evictions by result.
func NewActuator(opts config.Options, client kubernetes.Interface, provider cloudprovider.CloudProvider,
	evicted func(result string, pods int)) (*Actuator, error) {
	drainPriorities, err := opts.DrainPriorities()
	if err != nil {
		return nil, err
	}
	return &Actuator{
		Client:                         client,
		Provider:                       provider,
		MaxGracefulTermination:         time.Duration(opts.MaxGracefulTerminationSec) * time.Second,
		DrainPriority:                  drainPriorities,
		CordonNode:                     opts.CordonNodeBeforeTerminating,
		MaxPodEvictionTime:             opts.MaxPodEvictionTime,
		EvictionRetryInterval:          evictionRetryInterval,
		DeleteDelayAfterTaint:          opts.NodeDeleteDelayAfterTaint,
		DynamicDeleteDelay:             opts.DynamicNodeDeleteDelayAfterTaint,
		Evicted:                        evicted,
		BatchInterval:                  opts.NodeDeletionBatcherInterval,
		DelayDeletionTimeout:           opts.NodeDeletionDelayTimeout,
		EvictDaemonSetPodsFromEmpty:    opts.DaemonSetEvictionForEmptyNodes,
		EvictDaemonSetPodsFromOccupied: opts.DaemonSetEvictionForOccupiedNodes,
	}, nil
}
