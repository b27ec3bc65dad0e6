package config

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quotascale/quotascale/processors/status"
)

// Validate reports every invalid option.
func (o *Options) Validate() error {
	problems := slices.Concat(
		o.scaleUpProblems(),
		o.scaleDownProblems(),
		o.statusProblems(),
		o.similarityProblems(),
		o.drainProblems(),
		o.runtimeProblems(),
		o.providerProblems(),
	)
	if len(problems) > 0 {
		return fmt.Errorf("invalid options: %s", strings.Join(problems, "; "))
	}
	return nil
}

// scaleUpProblems checks the scale-up flags.
func (o *Options) scaleUpProblems() []string {
	var problems []string
	if o.ScanInterval <= 0 {
		problems = append(problems, fmt.Sprintf("--scan-interval must be positive, got %s", o.ScanInterval))
	}
	if o.MaxNodesTotal < 0 {
		problems = append(problems, fmt.Sprintf("--max-nodes-total must not be negative, got %d", o.MaxNodesTotal))
	}
	if o.MaxNodeProvisionTime <= 0 {
		problems = append(problems, fmt.Sprintf("--max-node-provision-time must be positive, got %s", o.MaxNodeProvisionTime))
	}
	if o.MaxNodesPerScaleUp <= 0 {
		problems = append(problems, fmt.Sprintf("--max-nodes-per-scaleup must be positive, got %d", o.MaxNodesPerScaleUp))
	}
	if o.InitialNodeGroupBackoffDuration <= 0 || o.MaxNodeGroupBackoffDuration < o.InitialNodeGroupBackoffDuration {
		problems = append(problems, fmt.Sprintf("--initial-node-group-backoff-duration (%s) must be positive and at most --max-node-group-backoff-duration (%s)",
			o.InitialNodeGroupBackoffDuration, o.MaxNodeGroupBackoffDuration))
	}
	return problems
}

// scaleDownProblems checks the scale-down and cluster health flags.
func (o *Options) scaleDownProblems() []string {
	var problems []string
	// Written so that NaN, which compares false with everything, is refused too.
	if !(o.ScaleDownUtilizationThreshold >= 0 && o.ScaleDownUtilizationThreshold <= 1) {
		problems = append(problems, fmt.Sprintf("--scale-down-utilization-threshold must be between 0 and 1, got %g", o.ScaleDownUtilizationThreshold))
	}
	if o.MaxScaleDownParallelism < 1 || o.MaxDrainParallelism < 1 {
		problems = append(problems, fmt.Sprintf("--max-scale-down-parallelism (%d) and --max-drain-parallelism (%d) must be at least 1",
			o.MaxScaleDownParallelism, o.MaxDrainParallelism))
	}
	if o.MaxEmptyBulkDelete < 0 || o.MaxGracefulTerminationSec < 0 {
		problems = append(problems, fmt.Sprintf("--max-empty-bulk-delete (%d) and --max-graceful-termination-sec (%d) must not be negative",
			o.MaxEmptyBulkDelete, o.MaxGracefulTerminationSec))
	}
	if !(o.MaxTotalUnreadyPercentage >= 0 && o.MaxTotalUnreadyPercentage <= 100) || o.OkTotalUnreadyCount < 0 {
		problems = append(problems, fmt.Sprintf("--max-total-unready-percentage (%g) must be between 0 and 100 and --ok-total-unready-count (%d) must not be negative",
			o.MaxTotalUnreadyPercentage, o.OkTotalUnreadyCount))
	}
	return problems
}

// statusProblems checks the flags of what the autoscaler writes.
func (o *Options) statusProblems() []string {
	var problems []string
	if _, err := status.ParseVisibilityFormat(o.VisibilityLogFormat); err != nil {
		problems = append(problems, fmt.Sprintf("--visibility-log-format: %v", err))
	}
	// Checked even without --visibility-log-file, so that a bad value is found
	// when it is written rather than when a file is configured later.
	if o.VisibilityLogMaxSizeMB <= 0 {
		problems = append(problems, fmt.Sprintf("--visibility-log-max-size-mb must be positive, got %d", o.VisibilityLogMaxSizeMB))
	}
	if o.VisibilityLogMaxBackups < 0 || o.VisibilityLogMaxAgeDays < 0 {
		problems = append(problems, fmt.Sprintf("--visibility-log-max-backups (%d) and --visibility-log-max-age-days (%d) must not be negative (0 keeps every rotated file)",
			o.VisibilityLogMaxBackups, o.VisibilityLogMaxAgeDays))
	}
	if o.WriteStatusConfigMap {
		for _, msg := range validation.IsDNS1123Subdomain(o.StatusConfigMapName) {
			problems = append(problems, fmt.Sprintf("--status-config-map-name %q is not a valid ConfigMap name: %s", o.StatusConfigMapName, msg))
		}
	}
	return problems
}

// similarityProblems checks the flags of node group similarity.
func (o *Options) similarityProblems() []string {
	var problems []string
	if len(o.BalancingLabels) > 0 && len(o.BalancingIgnoreLabels) > 0 {
		problems = append(problems, "--balancing-label cannot be combined with --balancing-ignore-label: the labels of --balancing-label alone decide similarity")
	}
	for _, r := range []struct {
		flag  string
		value float64
	}{{"--memory-difference-ratio", o.MemoryDifferenceRatio}, {"--max-free-difference-ratio", o.MaxFreeDifferenceRatio},
		{"--max-allocatable-difference-ratio", o.MaxAllocatableDifferenceRatio}} {
		if !(r.value >= 0) { // NaN too
			problems = append(problems, fmt.Sprintf("%s must not be negative, got %g", r.flag, r.value))
		}
	}
	return problems
}

// drainProblems checks the flags of how nodes are drained.
func (o *Options) drainProblems() []string {
	var problems []string
	if !(o.ScaleDownGPUUtilizationThreshold >= 0 && o.ScaleDownGPUUtilizationThreshold <= 1) {
		problems = append(problems, fmt.Sprintf("--scale-down-gpu-utilization-threshold must be between 0 and 1, got %g", o.ScaleDownGPUUtilizationThreshold))
	}
	if o.MaxBulkSoftTaintCount < 0 {
		problems = append(problems, fmt.Sprintf("--max-bulk-soft-taint-count must not be negative, got %d", o.MaxBulkSoftTaintCount))
	}
	if o.DrainPriorityConfig != "" {
		if _, err := o.DrainPriorities(); err != nil {
			problems = append(problems, err.Error())
		}
		// As upstream: the pairs give the grace periods.
		if o.MaxGracefulTerminationSec != Defaults().MaxGracefulTerminationSec {
			problems = append(problems, "--drain-priority-config cannot be used together with --max-graceful-termination-sec")
		}
	}
	return problems
}

// runtimeProblems checks the flags of the process and its clients.
func (o *Options) runtimeProblems() []string {
	var problems []string
	if o.SchedulerVerbosity < 0 {
		problems = append(problems, fmt.Sprintf("--scheduler-verbosity must not be negative, got %d", o.SchedulerVerbosity))
	}
	if o.MaxInactivity <= 0 || o.MaxFailingTime <= 0 {
		problems = append(problems, fmt.Sprintf("--max-inactivity (%s) and --max-failing-time (%s) must be positive", o.MaxInactivity, o.MaxFailingTime))
	}
	if o.StaleDataBound <= 0 {
		problems = append(problems, fmt.Sprintf("--max-stale-data must be positive, got %s", o.StaleDataBound))
	}
	if ns, name, ok := strings.Cut(o.KwokState, "/"); !ok || ns == "" || name == "" {
		problems = append(problems, fmt.Sprintf("--kwok-state-configmap must be NAMESPACE/NAME, got %q", o.KwokState))
	}
	if math.IsNaN(o.KubeClientQPS) || math.IsInf(o.KubeClientQPS, 0) {
		problems = append(problems, fmt.Sprintf("--kube-client-qps must be a number, got %g", o.KubeClientQPS))
	}
	if o.KubeClientBurst < 0 {
		problems = append(problems, fmt.Sprintf("--kube-client-burst must not be negative, got %d", o.KubeClientBurst))
	}
	if o.LeaderElect {
		for _, msg := range validation.IsDNS1123Subdomain(o.LeaderElectResourceName) {
			problems = append(problems, fmt.Sprintf("--leader-elect-resource-name %q is not a valid Lease name: %s", o.LeaderElectResourceName, msg))
		}
	}
	return problems
}

// providerProblems checks the cloud provider flags.
func (o *Options) providerProblems() []string {
	var problems []string
	switch o.CloudProviderName {
	case "kwok":
		if slices.ContainsFunc(o.NodeGroupAutoDiscovery, func(s string) bool { return s != "" }) || o.ClusterAPICloudConfigAuthoritative {
			problems = append(problems, "--node-group-auto-discovery and --clusterapi-cloud-config-authoritative are for --cloud-provider=clusterapi; "+
				"the kwok provider's node groups are its --cloud-config")
		}
	case "clusterapi":
	default:
		problems = append(problems, fmt.Sprintf("--cloud-provider %q is not supported: use kwok or clusterapi", o.CloudProviderName))
	}
	return problems
}
