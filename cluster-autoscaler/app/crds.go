package app

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// requireCRDs fails fast, naming the missing CRD, when an API the autoscaler
// watches is not served: its informer would otherwise wait forever while the
// process looks healthy.
func requireCRDs(client kubernetes.Interface, opts config.Options) error {
	type api struct {
		groupVersion, resource, crd string
	}
	needed := []api{{autoscalingv1beta1.SchemeGroupVersion.String(), "capacityquotas", "capacityquotas.autoscaling.x-k8s.io"}}
	if opts.ElasticQuotaEnabled {
		needed = append(needed,
			api{schedulingv1beta1.SchemeGroupVersion.String(), "elasticquotatrees", "elasticquotatrees.scheduling.sigs.k8s.io"},
			api{kueuev1beta1.SchemeGroupVersion.String(), "resourceflavors", "resourceflavors.kueue.x-k8s.io"})
	}
	for _, a := range needed {
		list, err := client.Discovery().ServerResourcesForGroupVersion(a.groupVersion)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("discovering %s: %w", a.groupVersion, err)
		}
		found := false
		if list != nil {
			for _, r := range list.APIResources {
				found = found || r.Name == a.resource
			}
		}
		if !found {
			hint := ""
			if a.resource != "capacityquotas" {
				hint = ", or run with --elastic-quota-enabled=false"
			}
			return fmt.Errorf("the API server does not serve %s (%s): install the CRD%s", a.resource, a.crd, hint)
		}
	}
	return nil
}
