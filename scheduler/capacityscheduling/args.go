package capacityscheduling

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedulerconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Args configure the plugin through the profile's pluginConfig.
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// StatusUpdateInterval bounds how often tree status is written. Status is
	// rate-limited rather than written on every pod event; while usage keeps
	// changing at every interval, the figures are written every five
	// intervals. Default 2s.
	StatusUpdateInterval *metav1.Duration `json:"statusUpdateInterval,omitempty"`

	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute are
	// DefaultPreemptionArgs' fields, with its defaults (10 and 100): they
	// bound how many nodes priority preemption dry-runs the preemptor on. A
	// reclaim dry-runs on at most MinCandidateNodesAbsolute nodes: its victims
	// are chosen by quota rather than by node, so every node sees the same
	// victims and a few fitting nodes are enough.
	MinCandidateNodesPercentage *int32 `json:"minCandidateNodesPercentage,omitempty"`
	MinCandidateNodesAbsolute   *int32 `json:"minCandidateNodesAbsolute,omitempty"`

	// ReclaimHoldDuration bounds how long the quota a reclaim frees stays
	// held for a preemptor that is not placed (its node went away, say).
	// Default 2m.
	ReclaimHoldDuration *metav1.Duration `json:"reclaimHoldDuration,omitempty"`

	// WriteStatus makes the leading replica write tree status, and the plugin
	// record events on trees and export metrics; default true. The autoscaler
	// runs this plugin in its scale-up simulation with false: only the
	// scheduler reports on trees.
	WriteStatus *bool `json:"writeStatus,omitempty"`

	// Webhook serves the validating admission webhook for ElasticQuotaTrees
	// and pod resizes from this scheduler (docs/scheduler.md). Off when unset;
	// set it in one profile only.
	Webhook *WebhookArgs `json:"webhook,omitempty"`
}

// WebhookArgs say where the webhook listens and with which certificate.
type WebhookArgs struct {
	// BindAddress is host:port, e.g. ":9443".
	BindAddress string `json:"bindAddress"`
	// CertFile and KeyFile are the PEM serving certificate and its key, read
	// at start.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

const (
	defaultStatusUpdateInterval = 2 * time.Second
	defaultReclaimHoldDuration  = 2 * time.Minute
	// maxHoldSweepInterval is how often expired holds are looked for at
	// most; shorter holds are looked for more often.
	maxHoldSweepInterval = 10 * time.Second
	minHoldSweepInterval = 100 * time.Millisecond
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
	if args.ReclaimHoldDuration == nil {
		args.ReclaimHoldDuration = &metav1.Duration{Duration: defaultReclaimHoldDuration}
	}
	if args.ReclaimHoldDuration.Duration <= 0 {
		return args, fmt.Errorf("%s args: reclaimHoldDuration must be positive, got %s", Name, args.ReclaimHoldDuration.Duration)
	}
	upstream := configv1.DefaultPreemptionArgs{
		MinCandidateNodesPercentage: args.MinCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   args.MinCandidateNodesAbsolute,
	}
	schedulerconfigv1.SetDefaults_DefaultPreemptionArgs(&upstream)
	args.MinCandidateNodesPercentage, args.MinCandidateNodesAbsolute = upstream.MinCandidateNodesPercentage, upstream.MinCandidateNodesAbsolute
	if args.WriteStatus == nil {
		t := true
		args.WriteStatus = &t
	}
	if *args.MinCandidateNodesAbsolute <= 0 {
		return args, fmt.Errorf("%s args: minCandidateNodesAbsolute must be positive, got %d", Name, *args.MinCandidateNodesAbsolute)
	}
	if err := validation.ValidateDefaultPreemptionArgs(field.NewPath(Name+" args"), args.defaultPreemption()); err != nil {
		return args, err
	}
	if w := args.Webhook; w != nil && (w.BindAddress == "" || w.CertFile == "" || w.KeyFile == "") {
		return args, fmt.Errorf("%s args: webhook needs bindAddress, certFile and keyFile, got %+v", Name, *w)
	}
	return args, nil
}

// holdSweepInterval is how often expired holds are looked for: a twelfth of
// the hold's lifetime, within [minHoldSweepInterval, maxHoldSweepInterval],
// so a hold ends at most about a twelfth late.
func (a Args) holdSweepInterval() time.Duration {
	return max(min(a.ReclaimHoldDuration.Duration/12, maxHoldSweepInterval), minHoldSweepInterval)
}

// defaultPreemption are the args of the DefaultPreemption plugin this plugin
// runs for priority preemption.
func (a Args) defaultPreemption() *config.DefaultPreemptionArgs {
	return &config.DefaultPreemptionArgs{
		MinCandidateNodesPercentage: *a.MinCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   *a.MinCandidateNodesAbsolute,
	}
}
