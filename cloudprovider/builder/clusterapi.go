package builder

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// buildClusterAPI builds the Cluster API provider against the management
// cluster ManagementConfig reaches.
func buildClusterAPI(ctx context.Context, opts config.Options, cluster Cluster) (cloudprovider.CloudProvider, error) {
	management, err := ManagementConfig(opts, cluster)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(management)
	if err != nil {
		return nil, fmt.Errorf("management cluster dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(management)
	if err != nil {
		return nil, fmt.Errorf("management cluster discovery client: %w", err)
	}
	return clusterapi.NewProvider(ctx, clusterapi.Options{
		Client: dyn, Discovery: disc, Nodes: cluster.Nodes,
		AutoDiscovery: opts.NodeGroupAutoDiscovery,
		// Upstream's environment variable pinning the Cluster API version.
		APIVersion: os.Getenv("CAPI_VERSION"),
	})
}

// ManagementConfig reaches the Cluster API management cluster the way
// upstream's clusterapi provider does: --cloud-config is its kubeconfig;
// without it, the workload cluster's config (--kubeconfig, or in-cluster) is
// used, unless --clusterapi-cloud-config-authoritative, which means the
// in-cluster config.
func ManagementConfig(opts config.Options, cluster Cluster) (*restclient.Config, error) {
	var management *restclient.Config
	var err error
	switch {
	case opts.CloudConfig != "":
		management, err = clientcmd.BuildConfigFromFlags("", opts.CloudConfig)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config %s: the management cluster kubeconfig: %w", opts.CloudConfig, err)
		}
	case opts.ClusterAPICloudConfigAuthoritative:
		management, err = restclient.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--clusterapi-cloud-config-authoritative without --cloud-config means the in-cluster config for the management cluster: %w", err)
		}
	default:
		return cluster.Config, nil
	}
	// Upstream applies --kube-client-qps and --kube-client-burst to both.
	management.QPS, management.Burst = cluster.Config.QPS, cluster.Config.Burst
	return restclient.AddUserAgent(management, cluster.UserAgent), nil
}
