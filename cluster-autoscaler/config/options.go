// Package config holds the autoscaler's options and the table of its command
// line (Flags): every flag of upstream's cluster-autoscaler binary with
// upstream's name, type and default, and what Quotascale does with it, so that
// existing manifests keep working or stop with a reason.
package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/quotascale/quotascale/processors/status"
)

// Options configure the autoscaler.
type Options struct {
	CloudProviderName string
	CloudConfig       string
	Kubeconfig        string
	// Namespace holds the status ConfigMap, the leader lease and the priority
	// expander's ConfigMap.
	Namespace               string
	ScanInterval            time.Duration
	Expander                string
	MaxNodesTotal           int
	MinCoresTotal           int64
	MaxCoresTotal           int64
	MinMemoryTotal          int64 // bytes
	MaxMemoryTotal          int64 // bytes
	MaxNodeProvisionTime    time.Duration
	WriteStatusConfigMap    bool
	LeaderElect             bool
	LeaderElectLease        time.Duration
	LeaderElectRenew        time.Duration
	LeaderElectRetry        time.Duration
	LeaderElectResourceName string
	// MaxInactivity and MaxFailingTime make /health-check fail on the leader
	// after that long without a loop, or without a successful one.
	MaxInactivity            time.Duration
	MaxFailingTime           time.Duration
	CapacityQuotasEnabled    bool
	SchedulerConfigFile      string
	MaxNodesPerScaleUp       int
	BalanceSimilarNodeGroups bool
	NewPodScaleUpDelay       time.Duration
	// ExpendablePodsPriorityCutoff: pods of a lower priority trigger no
	// scale-up and keep no node.
	ExpendablePodsPriorityCutoff int
	// ForceDaemonSets adds to templates made from a node the DaemonSet pods
	// that would run there but do not yet.
	ForceDaemonSets bool
	// Taints left out of templates made from a node, by key; and startup
	// taint key prefixes.
	IgnoreTaints, StartupTaints, StatusTaints, StartupTaintPrefixes []string
	// BypassedSchedulerNames' pods count for scale-up without waiting for
	// their scheduler to mark them unschedulable.
	BypassedSchedulerNames          []string
	InitialNodeGroupBackoffDuration time.Duration
	MaxNodeGroupBackoffDuration     time.Duration
	NodeGroupBackoffResetTimeout    time.Duration
	// Address serves /metrics and /health-check.
	Address string
	// StaleDataBound stops scale-ups when the informers' data is older than this,
	// as during an API server outage.
	StaleDataBound time.Duration
	// KwokState is where the kwok cloud keeps its instances, NAMESPACE/NAME.
	KwokState string
	// VisibilityLogFile receives the visibility log; empty means stdout.
	VisibilityLogFile string
	// VisibilityLogFormat names the schema of the visibility log's lines.
	VisibilityLogFormat string
	// Rotation of VisibilityLogFile: the size in megabytes that rotates it, the
	// rotated files kept by count and by age in days (0: no limit), and
	// whether rotated files are gzipped.
	VisibilityLogMaxSizeMB  int
	VisibilityLogMaxBackups int
	VisibilityLogMaxAgeDays int
	VisibilityLogCompress   bool
	// Scale-down, as upstream's flags of the same names.
	ScaleDownEnabled              bool
	ScaleDownUtilizationThreshold float64
	ScaleDownUnneededTime         time.Duration
	ScaleDownDelayAfterAdd        time.Duration
	ScaleDownDelayAfterFailure    time.Duration
	MaxEmptyBulkDelete            int
	MaxGracefulTerminationSec     int
	SkipNodesWithLocalStorage     bool
	SkipNodesWithSystemPods       bool
	// Upstream's scale-down flags of the same names.
	SkipNodesWithCustomControllerPods bool
	IgnoreDaemonSetsUtilization       bool
	ScaleDownDelayAfterDelete         time.Duration
	ScaleDownDelayTypeLocal           bool
	ScaleDownUnreadyEnabled           bool
	ScaleDownUnreadyTime              time.Duration
	ScaleDownNonEmptyCandidatesCount  int
	MaxScaleDownParallelism           int
	MaxDrainParallelism               int
	MinReplicaCount                   int
	NodeDeletionDelayTimeout          time.Duration
	DaemonSetEvictionForEmptyNodes    bool
	DaemonSetEvictionForOccupiedNodes bool
	// ElasticQuotaEnabled admits pending pods against the ElasticQuotaTree before
	// scale-up and runs the CapacityScheduling plugin in the simulation.
	ElasticQuotaEnabled bool
	// ElasticQuotaSchedulerNames are the schedulers that enforce the tree.
	ElasticQuotaSchedulerNames []string
	// Master is --kubernetes: the API server URL, overriding the kubeconfig's.
	Master string
	// The API client's settings, applied where main builds the connection.
	KubeAPIContentType string
	KubeClientQPS      float64
	KubeClientBurst    int
	// InterPodAffinityHostnameFastPath turns on the feature gate of that name
	// for the simulation's scheduler plugins.
	InterPodAffinityHostnameFastPath bool

	// Cluster API and the removal of failed instances, as upstream's flags of
	// the same names.
	//
	// NodeGroupAutoDiscovery are --node-group-auto-discovery specs
	// (clusterapi:namespace=NS,clusterName=NAME,KEY=VALUE).
	NodeGroupAutoDiscovery []string
	// ClusterAPICloudConfigAuthoritative makes an empty --cloud-config mean
	// the in-cluster config for the management cluster, not --kubeconfig.
	ClusterAPICloudConfigAuthoritative bool
	// ForceDeleteFailedNodes and ForceDeleteUnregisteredNodes remove failed
	// and long-unregistered instances even below their group's min size.
	ForceDeleteFailedNodes       bool
	ForceDeleteUnregisteredNodes bool

	// Health, as upstream's: above MaxTotalUnreadyPercentage unready nodes
	// (and more than OkTotalUnreadyCount) the cluster is unhealthy and the
	// autoscaler scales nothing. A registered node not ready within
	// MaxNodeStartupTime of its creation counts as unready.
	MaxTotalUnreadyPercentage float64
	OkTotalUnreadyCount       int
	MaxNodeStartupTime        time.Duration
	// StatusConfigMapName is the status ConfigMap in Namespace.
	StatusConfigMapName string
	// EmitPerNodeGroupMetrics adds upstream's per node group metrics.
	EmitPerNodeGroupMetrics bool
	// EnableProfiling serves /debug/pprof on Address.
	EnableProfiling bool
	// RecordDuplicatedEvents turns off the event correlator's spam filter.
	RecordDuplicatedEvents bool
	// FrequentLoopsEnabled starts a loop early when there is work for it.
	FrequentLoopsEnabled bool
	// ScaleUpFromZero lets the autoscaler act while no node is ready.
	ScaleUpFromZero bool
	// AllowedSchedulerNames, when set, are the only schedulers whose pending
	// pods count.
	AllowedSchedulerNames []string
	// SchedulerVerbosity is the highest -v level at which the simulation's
	// scheduler plugins log; SchedulerLogOffset, the process's -v less it, is
	// added to their lines' verbosity (the command line sets it).
	SchedulerVerbosity int
	SchedulerLogOffset int
	// CSINodeAwareScheduling lets the simulation read CSINode objects, for
	// CSI volume limits.
	CSINodeAwareScheduling bool
	// Similar node groups, as upstream's comparator: BalancingLabels alone
	// decide when set; otherwise capacity, allocatable and free resources
	// within the ratios and labels but BalancingIgnoreLabels.
	BalancingLabels               []string
	BalancingIgnoreLabels         []string
	MemoryDifferenceRatio         float64
	MaxFreeDifferenceRatio        float64
	MaxAllocatableDifferenceRatio float64
	// EnforceNodeGroupMinSize scales groups below their min size up to it.
	EnforceNodeGroupMinSize bool
	// ScaleFromUnschedulable ignores the templates' spec.unschedulable.
	ScaleFromUnschedulable bool
	// MaxBinpackingTime bounds one scale-up's estimates over all node groups,
	// MaxNodeGroupBinpackingDuration one node group's; 0 is no bound.
	MaxBinpackingTime              time.Duration
	MaxNodeGroupBinpackingDuration time.Duration
	// ParallelScaleUp resizes the node groups of one scale-up at the same
	// time; without it, resizing stops at the first failure.
	ParallelScaleUp bool
	// Scale-down, as upstream's flags of the same names.
	ScaleDownGPUUtilizationThreshold   float64
	IgnoreMirrorPodsUtilization        bool
	BlockingSystemPodDisruptionTimeout time.Duration
	UnremovableNodeRecheckTimeout      time.Duration
	ScaleDownSimulationTimeout         time.Duration
	NodeDeletionCandidateTTL           time.Duration
	MaxBulkSoftTaintCount              int
	MaxBulkSoftTaintTime               time.Duration
	CordonNodeBeforeTerminating        bool
	MaxPodEvictionTime                 time.Duration
	NodeDeleteDelayAfterTaint          time.Duration
	DynamicNodeDeleteDelayAfterTaint   bool
	// DrainPriorityConfig is --drain-priority-config as written:
	// priority:seconds pairs (DrainPriorities parses it).
	DrainPriorityConfig         string
	NodeRemovalLatencyTracking  bool
	NodeDeletionBatcherInterval time.Duration
	MaxNodeSkipEvalTimeTracker  bool
}

// Defaults are upstream's defaults, except where the flag table (Flags) says
// Ours: the cloud provider and quota enforcement.
func Defaults() Options {
	return Options{
		CloudProviderName:                  "kwok",
		VisibilityLogFormat:                string(status.FormatQuotascale),
		VisibilityLogMaxSizeMB:             100,
		VisibilityLogMaxBackups:            5,
		VisibilityLogMaxAgeDays:            7,
		VisibilityLogCompress:              true,
		KubeAPIContentType:                 "application/vnd.kubernetes.protobuf",
		KubeClientQPS:                      5,
		KubeClientBurst:                    10,
		Namespace:                          "kube-system",
		ScanInterval:                       10 * time.Second,
		Expander:                           "least-waste",
		MaxCoresTotal:                      320000,
		MaxMemoryTotal:                     6400000 << 30,
		MaxNodeProvisionTime:               15 * time.Minute,
		WriteStatusConfigMap:               true,
		LeaderElect:                        true,
		LeaderElectLease:                   15 * time.Second,
		LeaderElectRenew:                   10 * time.Second,
		LeaderElectRetry:                   2 * time.Second,
		LeaderElectResourceName:            "cluster-autoscaler",
		MaxInactivity:                      10 * time.Minute,
		MaxFailingTime:                     15 * time.Minute,
		CapacityQuotasEnabled:              true,
		MaxNodesPerScaleUp:                 1000,
		ExpendablePodsPriorityCutoff:       -10,
		InitialNodeGroupBackoffDuration:    5 * time.Minute,
		MaxNodeGroupBackoffDuration:        30 * time.Minute,
		NodeGroupBackoffResetTimeout:       3 * time.Hour,
		Address:                            ":8085",
		StaleDataBound:                     time.Minute,
		KwokState:                          "kube-system/quotascale-kwok-cloud",
		ElasticQuotaEnabled:                true,
		ElasticQuotaSchedulerNames:         []string{"quotascale-scheduler"},
		ScaleDownEnabled:                   true,
		ScaleDownUtilizationThreshold:      0.5,
		ScaleDownUnneededTime:              10 * time.Minute,
		ScaleDownDelayAfterAdd:             10 * time.Minute,
		ScaleDownDelayAfterFailure:         3 * time.Minute,
		MaxEmptyBulkDelete:                 10,
		MaxGracefulTerminationSec:          600,
		SkipNodesWithLocalStorage:          true,
		SkipNodesWithSystemPods:            true,
		SkipNodesWithCustomControllerPods:  true,
		ScaleDownUnreadyEnabled:            true,
		ScaleDownUnreadyTime:               20 * time.Minute,
		ScaleDownNonEmptyCandidatesCount:   30,
		MaxScaleDownParallelism:            10,
		MaxDrainParallelism:                1,
		NodeDeletionDelayTimeout:           2 * time.Minute,
		DaemonSetEvictionForOccupiedNodes:  true,
		MaxTotalUnreadyPercentage:          45,
		OkTotalUnreadyCount:                3,
		MaxNodeStartupTime:                 15 * time.Minute,
		StatusConfigMapName:                "cluster-autoscaler-status",
		FrequentLoopsEnabled:               true,
		MemoryDifferenceRatio:              0.015,
		MaxBinpackingTime:                  5 * time.Minute,
		ScaleDownGPUUtilizationThreshold:   0.5,
		BlockingSystemPodDisruptionTimeout: time.Hour,
		UnremovableNodeRecheckTimeout:      5 * time.Minute,
		ScaleDownSimulationTimeout:         30 * time.Second,
		MaxBulkSoftTaintCount:              10,
		MaxBulkSoftTaintTime:               3 * time.Second,
		CordonNodeBeforeTerminating:        true,
		MaxPodEvictionTime:                 2 * time.Minute,
		NodeDeleteDelayAfterTaint:          5 * time.Second,
		MaxNodeGroupBinpackingDuration:     10 * time.Second,
		MaxFreeDifferenceRatio:             0.05,
		MaxAllocatableDifferenceRatio:      0.05,
		ScaleUpFromZero:                    true,
	}
}

// DrainPriority is one pair of --drain-priority-config.
type DrainPriority struct {
	Priority    int32
	GracePeriod time.Duration
}

// DrainPriorities parses --drain-priority-config: comma-separated
// priority:terminationGracePeriodSeconds pairs of integers, as upstream.
func (o *Options) DrainPriorities() ([]DrainPriority, error) {
	if o.DrainPriorityConfig == "" {
		return nil, nil
	}
	var out []DrainPriority
	for _, pair := range strings.Split(o.DrainPriorityConfig, ",") {
		p, g, ok := strings.Cut(pair, ":")
		priority, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		seconds, err2 := strconv.ParseInt(strings.TrimSpace(g), 10, 64)
		if !ok || err1 != nil || err2 != nil || seconds < 0 || seconds > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("--drain-priority-config %q: %q is not priority:terminationGracePeriodSeconds with integers", o.DrainPriorityConfig, pair)
		}
		out = append(out, DrainPriority{Priority: int32(priority), GracePeriod: time.Duration(seconds) * time.Second})
	}
	return out, nil
}
