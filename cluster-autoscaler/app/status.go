package app

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	statusapi "github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/cluster-autoscaler/core"
	"github.com/quotascale/quotascale/processors/status"
)

// openVisibilityLog appends to --visibility-log-file, rotated by the
// --visibility-log-max-* flags, or writes to stdout when no file is set; the
// file is closed when ctx ends.
func openVisibilityLog(ctx context.Context, opts config.Options) (*status.VisibilityLog, error) {
	format := status.VisibilityFormat(opts.VisibilityLogFormat)
	if opts.VisibilityLogFile == "" {
		return status.NewVisibilityLog(os.Stdout, format), nil
	}
	f, err := status.OpenVisibilityFile(opts.VisibilityLogFile, status.VisibilityFileRotation{
		MaxSizeMB:  opts.VisibilityLogMaxSizeMB,
		MaxBackups: opts.VisibilityLogMaxBackups,
		MaxAgeDays: opts.VisibilityLogMaxAgeDays,
		Compress:   opts.VisibilityLogCompress,
	})
	if err != nil {
		return nil, fmt.Errorf("--visibility-log-file: %w", err)
	}
	go func() { <-ctx.Done(); _ = f.Close() }()
	return status.NewVisibilityLog(f, format), nil
}

// writeStatusConfigMap has the loop write the status ConfigMap
// (--write-status-configmap) and record events about the autoscaler itself on
// it, as upstream's, once it has been written.
func writeStatusConfigMap(deps *core.Deps, opts config.Options, client kubernetes.Interface, recorder record.EventRecorder) {
	var statusObject *corev1.ConfigMap
	deps.WriteStatus = func(ctx context.Context, s statusapi.Status, now time.Time) error {
		cm, err := clusterstate.WriteStatusConfigMap(ctx, client, opts.Namespace, opts.StatusConfigMapName, s, now)
		if err == nil {
			statusObject = cm
		}
		return err
	}
	deps.Event = func(eventType, reason, message string) {
		if statusObject != nil {
			recorder.Event(statusObject, eventType, reason, message)
		}
	}
}
