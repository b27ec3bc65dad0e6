package localcluster

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
)

// StartKwokCloud runs the kwok cloud backend (the "infrastructure" behind the kwok
// cloud provider) in this process against the cluster: it provisions the
// instances an autoscaler asks for as kwok nodes. opts.Client defaults to the
// cluster's client. ctx bounds only the start (the config must load); the
// backend runs until stop is called or the cluster stops. stop waits for the
// backend to finish its current pass and may be called more than once.
func (c *Cluster) StartKwokCloud(ctx context.Context, opts kwok.Options) (stop func(), err error) {
	if opts.Client == nil {
		opts.Client = c.Client
	}
	cloud, err := kwok.NewCloud(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the kwok cloud: %w", err)
	}
	runCtx, cancel := context.WithCancel(klog.NewContext(c.background, klog.FromContext(ctx).WithName("kwok-cloud")))
	done := make(chan struct{})
	go func() {
		defer close(done)
		cloud.Run(runCtx)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}, nil
}
