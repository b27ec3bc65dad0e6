package localcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	restclient "k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/apis/crds"
)

// installCRDs creates our CRDs and waits until they are established, so that the
// first object created afterwards does not race the new REST endpoint.
func installCRDs(ctx context.Context, config *restclient.Config, extra [][]byte) error {
	manifests, err := crds.Manifests()
	if err != nil {
		return fmt.Errorf("reading embedded CRDs: %w", err)
	}
	return installCRDManifests(ctx, config, append(manifests, extra...))
}

// installCRDManifests creates CRDs (existing ones are kept) and waits until
// every one is established.
func installCRDManifests(ctx context.Context, config *restclient.Config, manifests [][]byte) error {
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	names := make([]string, 0, len(manifests))
	served := map[string][]string{} // group/version -> plurals
	for _, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(m, crd); err != nil {
			return fmt.Errorf("decoding CRD: %w", err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gv := crd.Spec.Group + "/" + v.Name
				served[gv] = append(served[gv], crd.Spec.Names.Plural)
			}
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("CRD %s names not accepted: %s", name, c.Message)
				}
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	// Established is not yet discoverable: the API server publishes a new
	// group in discovery a moment later, and clients that map kinds through
	// discovery (kubectl apply, Cluster.Apply) would not find it.
	for gv, plurals := range served {
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := discoveryClient.ServerResourcesForGroupVersion(gv)
			if err != nil {
				lastErr = err // not found until published; anything else is kept for the timeout's error
				return false, nil
			}
			for _, plural := range plurals {
				if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %v of %s in discovery (last error: %v): %w", plurals, gv, lastErr, err)
		}
	}
	return nil
}
