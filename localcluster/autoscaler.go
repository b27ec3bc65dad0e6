package localcluster

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// StartAutoscaler runs Quotascale's cluster autoscaler in this process. With
// the kwok provider (opts.CloudProviderName empty or kwok) it also runs the
// kwok cloud behind it, both reading the node groups from opts.CloudConfig (a
// file or configmap:NAMESPACE/NAME); with clusterapi, Cluster API
// (StartClusterAPI) is the infrastructure. It loops every opts.ScanInterval
// until stop is called or the cluster stops.
func (c *Cluster) StartAutoscaler(ctx context.Context, opts config.Options) (a *app.Autoscaler, stop func(), err error) {
	// This cluster's scheduler runs CapacityScheduling in its default profile.
	opts.ElasticQuotaSchedulerNames = []string{corev1.DefaultSchedulerName}
	stopCloud := func() {}
	if opts.CloudProviderName == "" || opts.CloudProviderName == kwok.ProviderName {
		opts.CloudProviderName = kwok.ProviderName
		if stopCloud, err = c.startKwokInfrastructure(ctx, opts); err != nil {
			return nil, nil, err
		}
	}
	runCtx, cancel := context.WithCancel(klog.NewContext(c.background, klog.FromContext(ctx).WithName(app.Component)))
	a, err = app.New(runCtx, opts, c.Config, app.NewProcess(opts))
	if err != nil {
		cancel()
		stopCloud()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(runCtx)
	}()
	var once sync.Once
	return a, func() {
		once.Do(func() {
			cancel()
			<-done
			stopCloud()
		})
	}, nil
}

// startKwokInfrastructure starts the kwok cloud behind the kwok provider of
// opts: the same node groups (--cloud-config) and state ConfigMap
// (--kwok-state-configmap).
func (c *Cluster) startKwokInfrastructure(ctx context.Context, opts config.Options) (stop func(), err error) {
	source, err := kwok.ParseSourceRef(opts.CloudConfig, c.Client)
	if err != nil {
		return nil, fmt.Errorf("node group config: %w", err)
	}
	ns, name, _ := strings.Cut(opts.KwokState, "/")
	return c.StartKwokCloud(ctx, kwok.Options{Config: source, StateNamespace: ns, StateName: name})
}
