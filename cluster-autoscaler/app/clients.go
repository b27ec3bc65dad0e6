package app

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// clients are the autoscaler's connections to the cluster and the informers
// its components read.
type clients struct {
	// config is the connection, named Component.
	config  *restclient.Config
	client  kubernetes.Interface
	dynamic dynamic.Interface
	// factory watches the whole cluster; namespaced only the autoscaler's
	// namespace, where the priority expander's ConfigMap lives.
	factory, namespaced informers.SharedInformerFactory
}

func connect(opts config.Options, restConfig *restclient.Config) (*clients, error) {
	restConfig = restclient.AddUserAgent(restclient.CopyConfig(restConfig), Component)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &clients{
		config: restConfig, client: client, dynamic: dyn,
		factory:    informers.NewSharedInformerFactory(client, 0),
		namespaced: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace)),
	}, nil
}

// start runs the custom resources' informers, then the factories', and waits
// for all of them to sync. As upstream's, the informers have until ctx ends to
// sync: an API server away for a while (an outage, a take-over during one)
// delays the start, it does not fail it. Only ctx ending does, and the error
// says so (wraps ctx's error), so that a caller tells losing the lease or
// being stopped from a failure.
func (c *clients) start(ctx context.Context, custom []cache.SharedIndexInformer) error {
	synced := make([]cache.InformerSynced, 0, len(custom))
	for _, informer := range custom {
		go informer.RunWithContext(ctx)
		synced = append(synced, informer.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the CapacityQuota and ElasticQuotaTree informers did not sync: %w", ctx.Err())
	}
	for _, f := range []informers.SharedInformerFactory{c.factory, c.namespaced} {
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("informer for %v did not sync: %w", typ, ctx.Err())
			}
		}
	}
	return nil
}
