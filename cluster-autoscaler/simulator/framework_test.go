package simulator

import (
	"slices"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// TestNewFrameworkWithGenericWorkload builds the simulation of the default
// profile with the Workload API's gate on, as the autoscaler does beside a
// scheduler that runs gangs: the profile then holds GangScheduling, and
// DefaultPreemption reads pod groups, both from the framework's pod group
// manager when they are built.
func TestNewFrameworkWithGenericWorkload(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	cfg, err := DefaultSchedulerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	fw, err := NewFramework(t.Context(), FrameworkOptions{
		Config: cfg, Client: client, Informers: informers.NewSharedInformerFactory(client, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(fw.first.ListPlugins().Permit.Enabled, func(p config.Plugin) bool { return p.Name == names.GangScheduling }) {
		t.Errorf("the simulated default profile's Permit plugins %v leave out %s with GenericWorkload on",
			fw.first.ListPlugins().Permit.Enabled, names.GangScheduling)
	}
}
