// Package builder turns --cloud-provider into a provider: one registry from
// each provider's name to the function that builds it from the autoscaler's
// options, the shape of upstream cluster-autoscaler's cloudprovider/builder.
// A new provider is one entry here and one file beside it; the autoscaler's
// wiring does not change.
package builder

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	restclient "k8s.io/client-go/rest"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// Cluster is the workload cluster as the autoscaler reaches it; a provider
// builds its own clients from it.
type Cluster struct {
	Client kubernetes.Interface
	// Config is the workload cluster's connection, already named with
	// UserAgent.
	Config *restclient.Config
	// Nodes are the workload cluster's nodes, from the autoscaler's informer.
	Nodes corelisters.NodeLister
	// UserAgent names the autoscaler on connections a provider opens to
	// another cluster.
	UserAgent string
}

// Constructor builds one provider. ctx bounds everything the provider
// starts.
type Constructor func(ctx context.Context, opts config.Options, cluster Cluster) (cloudprovider.CloudProvider, error)

// constructors are the providers this binary is built with, by
// --cloud-provider name.
var constructors = map[string]Constructor{
	kwok.ProviderName:       buildKwok,
	clusterapi.ProviderName: buildClusterAPI,
}

// AvailableCloudProviders are the names --cloud-provider accepts, sorted.
func AvailableCloudProviders() []string {
	return slices.Sorted(maps.Keys(constructors))
}

// NewCloudProvider builds the provider opts.CloudProviderName names.
func NewCloudProvider(ctx context.Context, opts config.Options, cluster Cluster) (cloudprovider.CloudProvider, error) {
	build, ok := constructors[opts.CloudProviderName]
	if !ok {
		return nil, fmt.Errorf("--cloud-provider %q is not supported: use one of %v", opts.CloudProviderName, AvailableCloudProviders())
	}
	return build(ctx, opts, cluster)
}
