// Package config holds the autoscaler's options and their flags. Flag names are
// upstream's wherever upstream has the flag, so existing manifests keep working.
package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Options configure the autoscaler.
type Options struct {
	CloudProviderName string
	CloudConfig       string
	Kubeconfig        string
	// Namespace holds the status ConfigMap, the leader lease and the priority
	// expander's ConfigMap.
	Namespace                       string
	ScanInterval                    time.Duration
	Expander                        string
	MaxNodesTotal                   int
	MinCoresTotal                   int64
	MaxCoresTotal                   int64
	MinMemoryTotal                  int64 // bytes
	MaxMemoryTotal                  int64 // bytes
	MaxNodeProvisionTime            time.Duration
	WriteStatusConfigMap            bool
	LeaderElect                     bool
	LeaderElectLease                time.Duration
	LeaderElectRenew                time.Duration
	LeaderElectRetry                time.Duration
	CapacityQuotasEnabled           bool
	SchedulerConfigFile             string
	MaxNodesPerScaleUp              int
	BalanceSimilarNodeGroups        bool
	NewPodScaleUpDelay              time.Duration
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
	// ElasticQuotaEnabled admits pending pods against the ElasticQuotaTree before
	// scale-up and runs the CapacityScheduling plugin in the simulation.
	ElasticQuotaEnabled bool
}

// Defaults are upstream's defaults, except the expander: least-waste.
func Defaults() Options {
	return Options{
		CloudProviderName:               "kwok",
		Namespace:                       "kube-system",
		ScanInterval:                    10 * time.Second,
		Expander:                        "least-waste",
		MaxCoresTotal:                   320000,
		MaxMemoryTotal:                  6400000 << 30,
		MaxNodeProvisionTime:            15 * time.Minute,
		WriteStatusConfigMap:            true,
		LeaderElect:                     true,
		LeaderElectLease:                15 * time.Second,
		LeaderElectRenew:                10 * time.Second,
		LeaderElectRetry:                2 * time.Second,
		CapacityQuotasEnabled:           true,
		MaxNodesPerScaleUp:              1000,
		InitialNodeGroupBackoffDuration: 5 * time.Minute,
		MaxNodeGroupBackoffDuration:     30 * time.Minute,
		NodeGroupBackoffResetTimeout:    3 * time.Hour,
		Address:                         ":8085",
		StaleDataBound:                  time.Minute,
		KwokState:                       "kube-system/quotascale-kwok-cloud",
		ElasticQuotaEnabled:             true,
		ScaleDownEnabled:                true,
		ScaleDownUtilizationThreshold:   0.5,
		ScaleDownUnneededTime:           10 * time.Minute,
		ScaleDownDelayAfterAdd:          10 * time.Minute,
		ScaleDownDelayAfterFailure:      3 * time.Minute,
		MaxEmptyBulkDelete:              10,
		MaxGracefulTerminationSec:       600,
		SkipNodesWithLocalStorage:       true,
		SkipNodesWithSystemPods:         true,
	}
}

// AddFlags registers the flags on fs, writing into o.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CloudProviderName, "cloud-provider", o.CloudProviderName, "Cloud provider type: kwok or clusterapi.")
	fs.StringVar(&o.CloudConfig, "cloud-config", o.CloudConfig, "The cloud provider configuration: for kwok, a node group config file or configmap:NAMESPACE/NAME[/KEY]; for clusterapi, unused.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; empty means in-cluster.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the status ConfigMap, the leader lease and the priority expander ConfigMap.")
	fs.DurationVar(&o.ScanInterval, "scan-interval", o.ScanInterval, "How often the cluster is re-evaluated for scale up or down.")
	fs.StringVar(&o.Expander, "expander", o.Expander, "Comma-separated chain of expanders: least-waste, most-pods, priority, random.")
	fs.IntVar(&o.MaxNodesTotal, "max-nodes-total", o.MaxNodesTotal, "Maximum number of nodes in all node groups; 0 means no limit.")
	fs.Var(&rangeValue{min: &o.MinCoresTotal, max: &o.MaxCoresTotal, unit: 1}, "cores-total", "Minimum and maximum number of cores in the cluster, as <min>:<max>.")
	fs.Var(&rangeValue{min: &o.MinMemoryTotal, max: &o.MaxMemoryTotal, unit: 1 << 30}, "memory-total", "Minimum and maximum GiB of memory in the cluster, as <min>:<max>.")
	fs.DurationVar(&o.MaxNodeProvisionTime, "max-node-provision-time", o.MaxNodeProvisionTime, "Maximum time a node may take to register before its scale-up counts as failed.")
	fs.BoolVar(&o.WriteStatusConfigMap, "write-status-configmap", o.WriteStatusConfigMap, "Write the cluster-autoscaler-status ConfigMap.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader before running, so that only one replica acts.")
	fs.DurationVar(&o.LeaderElectLease, "leader-elect-lease-duration", o.LeaderElectLease, "How long a non-leader waits after the last renewal before taking over.")
	fs.DurationVar(&o.LeaderElectRenew, "leader-elect-renew-deadline", o.LeaderElectRenew, "How long the leader keeps trying to renew before giving up.")
	fs.DurationVar(&o.LeaderElectRetry, "leader-elect-retry-period", o.LeaderElectRetry, "How often candidates try to acquire or renew leadership.")
	fs.BoolVar(&o.CapacityQuotasEnabled, "capacity-quotas-enabled", o.CapacityQuotasEnabled, "Enforce CapacityQuota objects (autoscaling.x-k8s.io/v1beta1) on scale-up.")
	fs.StringVar(&o.SchedulerConfigFile, "scheduler-config-file", o.SchedulerConfigFile, "KubeSchedulerConfiguration whose first profile the scale-up simulation runs; empty means the default profile.")
	fs.IntVar(&o.MaxNodesPerScaleUp, "max-nodes-per-scaleup", o.MaxNodesPerScaleUp, "Maximum number of nodes added by one scale-up.")
	fs.BoolVar(&o.BalanceSimilarNodeGroups, "balance-similar-node-groups", o.BalanceSimilarNodeGroups, "Spread a scale-up over node groups with the same shape.")
	fs.DurationVar(&o.NewPodScaleUpDelay, "new-pod-scale-up-delay", o.NewPodScaleUpDelay, "Pods younger than this are not considered for scale-up.")
	fs.DurationVar(&o.InitialNodeGroupBackoffDuration, "initial-node-group-backoff-duration", o.InitialNodeGroupBackoffDuration, "Backoff after a node group's first failed scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBackoffDuration, "max-node-group-backoff-duration", o.MaxNodeGroupBackoffDuration, "Longest backoff after repeated failed scale-ups.")
	fs.DurationVar(&o.NodeGroupBackoffResetTimeout, "node-group-backoff-reset-timeout", o.NodeGroupBackoffResetTimeout, "Time without failures after which the backoff starts over.")
	fs.StringVar(&o.Address, "address", o.Address, "Address serving /metrics and /health-check.")
	fs.StringVar(&o.KwokState, "kwok-state-configmap", o.KwokState, "With --cloud-provider=kwok, the ConfigMap (NAMESPACE/NAME) where the kwok cloud keeps its instances.")
	fs.BoolVar(&o.ScaleDownEnabled, "scale-down-enabled", o.ScaleDownEnabled, "Remove nodes that are unneeded.")
	fs.Float64Var(&o.ScaleDownUtilizationThreshold, "scale-down-utilization-threshold", o.ScaleDownUtilizationThreshold, "A node is unneeded when the cpu and memory its pods request are below this fraction of its allocatable.")
	fs.DurationVar(&o.ScaleDownUnneededTime, "scale-down-unneeded-time", o.ScaleDownUnneededTime, "How long a node must be unneeded before it is removed.")
	fs.DurationVar(&o.ScaleDownDelayAfterAdd, "scale-down-delay-after-add", o.ScaleDownDelayAfterAdd, "How long after a scale-up scale-down resumes.")
	fs.DurationVar(&o.ScaleDownDelayAfterFailure, "scale-down-delay-after-failure", o.ScaleDownDelayAfterFailure, "How long after a failed removal scale-down resumes.")
	fs.IntVar(&o.MaxEmptyBulkDelete, "max-empty-bulk-delete", o.MaxEmptyBulkDelete, "Maximum number of empty nodes removed at once.")
	fs.IntVar(&o.MaxGracefulTerminationSec, "max-graceful-termination-sec", o.MaxGracefulTerminationSec, "Longest time a drain waits for a pod to terminate, in seconds.")
	fs.BoolVar(&o.SkipNodesWithLocalStorage, "skip-nodes-with-local-storage", o.SkipNodesWithLocalStorage, "Never remove nodes with pods using emptyDir or hostPath storage.")
	fs.BoolVar(&o.SkipNodesWithSystemPods, "skip-nodes-with-system-pods", o.SkipNodesWithSystemPods, "Never remove nodes with kube-system pods that no PodDisruptionBudget covers.")
	fs.BoolVar(&o.ElasticQuotaEnabled, "elastic-quota-enabled", o.ElasticQuotaEnabled, "Trigger no scale-up for pods their ElasticQuotaTree (scheduling.sigs.k8s.io/v1beta1) will not admit, and honour its ResourceFlavors in the simulation.")
	fs.StringVar(&o.VisibilityLogFile, "visibility-log-file", o.VisibilityLogFile, "File the visibility log (one JSON decision per line) is appended to; empty means stdout.")
	fs.DurationVar(&o.StaleDataBound, "max-stale-data", o.StaleDataBound, "Scale nothing while the cluster data is older than this, as during an API server outage.")
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
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
	// Written so that NaN, which compares false with everything, is refused too.
	if !(o.ScaleDownUtilizationThreshold >= 0 && o.ScaleDownUtilizationThreshold <= 1) {
		problems = append(problems, fmt.Sprintf("--scale-down-utilization-threshold must be between 0 and 1, got %g", o.ScaleDownUtilizationThreshold))
	}
	if o.MaxEmptyBulkDelete < 0 || o.MaxGracefulTerminationSec < 0 {
		problems = append(problems, fmt.Sprintf("--max-empty-bulk-delete (%d) and --max-graceful-termination-sec (%d) must not be negative",
			o.MaxEmptyBulkDelete, o.MaxGracefulTerminationSec))
	}
	if o.StaleDataBound <= 0 {
		problems = append(problems, fmt.Sprintf("--max-stale-data must be positive, got %s", o.StaleDataBound))
	}
	if ns, name, ok := strings.Cut(o.KwokState, "/"); !ok || ns == "" || name == "" {
		problems = append(problems, fmt.Sprintf("--kwok-state-configmap must be NAMESPACE/NAME, got %q", o.KwokState))
	}
	switch o.CloudProviderName {
	case "kwok", "clusterapi":
	default:
		problems = append(problems, fmt.Sprintf("--cloud-provider %q is not supported: use kwok or clusterapi", o.CloudProviderName))
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid options: %s", strings.Join(problems, "; "))
	}
	return nil
}

// rangeValue parses upstream's <min>:<max> flags.
type rangeValue struct {
	min, max *int64
	unit     int64
}

func (r *rangeValue) String() string {
	if r.min == nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", *r.min/r.unit, *r.max/r.unit)
}

// Set writes both bounds or, on any error, neither. A bound whose value in
// bytes would not fit an int64 is refused: wrapped around, it would turn the
// cluster-wide limit negative and void it.
func (r *rangeValue) Set(s string) error {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("%q is not <min>:<max>", s)
	}
	minV, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	if err != nil {
		return fmt.Errorf("%q: min is not an integer", s)
	}
	maxV, err := strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
	if err != nil {
		return fmt.Errorf("%q: max is not an integer", s)
	}
	if minV < 0 || maxV < minV {
		return fmt.Errorf("%q: want 0 <= min <= max", s)
	}
	if limit := math.MaxInt64 / r.unit; maxV > limit {
		return fmt.Errorf("%q: max is above %d", s, limit)
	}
	*r.min, *r.max = minV*r.unit, maxV*r.unit
	return nil
}

func (r *rangeValue) Type() string { return "min:max" }
