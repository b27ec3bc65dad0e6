package app

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// podGroups is the PodGroup lookup that sizes the gangs of the Workload API,
// from an informer, when the API server serves scheduling.k8s.io/v1beta1
// podgroups (the GenericWorkload gate). Where it does not, it is nil: no pod
// can name a PodGroup there, and ACK's gang labels need no lookup.
func podGroups(c *clients) (func(namespace, name string) (*schedulingv1beta1.PodGroup, bool), error) {
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	list, err := c.client.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("discovering %s: %w", gv, err)
	}
	served := false
	if list != nil {
		for _, r := range list.APIResources {
			served = served || r.Name == "podgroups"
		}
	}
	if !served {
		return nil, nil
	}
	// Asking for the lister registers the informer, which start runs.
	lister := c.factory.Scheduling().V1beta1().PodGroups().Lister()
	return func(namespace, name string) (*schedulingv1beta1.PodGroup, bool) {
		pg, err := lister.PodGroups(namespace).Get(name)
		return pg, err == nil
	}, nil
}
