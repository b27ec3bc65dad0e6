package app

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

func TestRequireCRDs(t *testing.T) {
	served := map[string]*metav1.APIResourceList{
		"cq":   {GroupVersion: "autoscaling.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "capacityquotas"}}},
		"eqt":  {GroupVersion: "scheduling.sigs.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "elasticquotatrees"}}},
		"flav": {GroupVersion: "kueue.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "resourceflavors"}}},
	}
	for _, tc := range []struct {
		name    string
		served  []string
		elastic bool
		want    string
	}{
		{name: "all served", served: []string{"cq", "eqt", "flav"}, elastic: true},
		{name: "only CapacityQuota, tree off", served: []string{"cq"}},
		{name: "no CapacityQuota", served: []string{"eqt", "flav"}, elastic: true,
			want: "the API server does not serve capacityquotas (capacityquotas.autoscaling.x-k8s.io): install the CRD"},
		{name: "no ResourceFlavor", served: []string{"cq", "eqt"}, elastic: true,
			want: "the API server does not serve resourceflavors (resourceflavors.kueue.x-k8s.io): install the CRD, or run with --elastic-quota-enabled=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, s := range tc.served {
				client.Discovery().(*fakediscovery.FakeDiscovery).Resources = append(client.Discovery().(*fakediscovery.FakeDiscovery).Resources, served[s])
			}
			opts := config.Defaults()
			opts.ElasticQuotaEnabled = tc.elastic
			err := requireCRDs(client, opts)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("requireCRDs() = %q, want %q", got, tc.want)
			}
		})
	}
}
