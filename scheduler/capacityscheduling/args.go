package capacityscheduling

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Args configure the plugin through the profile's pluginConfig.
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// StatusUpdateInterval bounds how often tree status is written. Status is
	// rate-limited rather than written on every pod event. Default 2s.
	StatusUpdateInterval *metav1.Duration `json:"statusUpdateInterval,omitempty"`

	// MinCandidateNodesAbsolute bounds how many nodes a reclaim dry-runs the
	// preemptor on. Every node sees the same victims, since reclaim victims are
	// chosen by quota rather than by node, so a few fitting nodes are enough.
	// Default 100.
	MinCandidateNodesAbsolute *int32 `json:"minCandidateNodesAbsolute,omitempty"`

	// WriteStatus makes the elected replica write tree status, and the plugin
	// record events on trees; default true. The autoscaler runs this plugin in its
	// scale-up simulation with false: only the scheduler reports on trees.
	WriteStatus *bool `json:"writeStatus,omitempty"`
}

const (
	defaultStatusUpdateInterval = 2 * time.Second
	defaultCandidateNodes       = 100
)

func decodeArgs(obj runtime.Object) (Args, error) {
	var args Args
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return args, fmt.Errorf("decoding %s args: %w", Name, err)
	}
	if args.StatusUpdateInterval == nil {
		args.StatusUpdateInterval = &metav1.Duration{Duration: defaultStatusUpdateInterval}
	}
	if args.StatusUpdateInterval.Duration <= 0 {
		return args, fmt.Errorf("%s args: statusUpdateInterval must be positive, got %s", Name, args.StatusUpdateInterval.Duration)
	}
	if args.MinCandidateNodesAbsolute == nil {
		n := int32(defaultCandidateNodes)
		args.MinCandidateNodesAbsolute = &n
	}
	if args.WriteStatus == nil {
		t := true
		args.WriteStatus = &t
	}
	if *args.MinCandidateNodesAbsolute <= 0 {
		return args, fmt.Errorf("%s args: minCandidateNodesAbsolute must be positive, got %d", Name, *args.MinCandidateNodesAbsolute)
	}
	return args, nil
}
