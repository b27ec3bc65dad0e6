package expander

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// PriorityConfigFromLister adapts a ConfigMap lister scoped to the autoscaler's
// namespace into Deps.PriorityConfig. A missing ConfigMap and a ConfigMap without
// the "priorities" key both read as not found: either way there is nothing to
// apply, and the priority stage keeps every option.
func PriorityConfigFromLister(lister corelisters.ConfigMapNamespaceLister) func() (string, bool, error) {
	return func() (string, bool, error) {
		cm, err := lister.Get(PriorityConfigMapName)
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("getting ConfigMap %s: %w", PriorityConfigMapName, err)
		}
		data, ok := cm.Data[PriorityConfigMapKey]
		return data, ok, nil
	}
}
