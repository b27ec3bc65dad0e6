package app

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// newEventBroadcaster is upstream's: with --record-duplicated-events every
// event is sent; without it (the default) one event per reason and object is
// let through every 5 minutes, except on the status ConfigMap, where events
// with different messages all go.
func newEventBroadcaster(ctx context.Context, opts config.Options) record.EventBroadcaster {
	if opts.RecordDuplicatedEvents {
		return record.NewBroadcaster(record.WithContext(ctx))
	}
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS:          1. / 300,
		BurstSize:    1,
		LRUCacheSize: 8192,
		SpamKeyFunc: func(e *corev1.Event) string {
			o := e.InvolvedObject
			if o.Kind == "ConfigMap" && o.Namespace == opts.Namespace && o.Name == opts.StatusConfigMapName {
				return e.Message
			}
			return strings.Join([]string{e.Reason, e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion}, "")
		},
	}))
}

// newRecorder records events as Component, until ctx ends.
func newRecorder(ctx context.Context, opts config.Options, client kubernetes.Interface) record.EventRecorder {
	broadcaster := newEventBroadcaster(ctx, opts)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() { <-ctx.Done(); broadcaster.Shutdown() }()
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})
}
