package builder

import (
	"context"
	"fmt"
	"strings"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// buildKwok builds the kwok cloud's provider: --cloud-config names its node
// groups (a file, or a ConfigMap), --kwok-state-configmap where it keeps its
// instances.
func buildKwok(ctx context.Context, opts config.Options, cluster Cluster) (cloudprovider.CloudProvider, error) {
	source, err := kwok.ParseSourceRef(opts.CloudConfig, cluster.Client)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	ns, name, _ := strings.Cut(opts.KwokState, "/")
	return kwok.NewProvider(ctx, kwok.Options{Client: cluster.Client, Config: source, StateNamespace: ns, StateName: name})
}
