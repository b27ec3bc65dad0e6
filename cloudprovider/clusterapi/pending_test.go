package clusterapi

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/quotascale/quotascale/cloudprovider"
)

var infraMachines = schema.GroupVersionResource{Group: infraTemplates.Group, Version: infraTemplates.Version, Resource: "kwokmachines"}

// TestNodeRegisteredBeforeMachineProviderID: the node of a machine has
// registered, its infrastructure machine has the provider ID, and Cluster
// API's Machine controller has not copied it to the Machine yet (found in
// the demo's recording: a CapacityQuota's used plus upcoming cpu above its
// limit while machines provisioned). The machine's instance is the node's
// provider ID, so the registry counts the node as registered and not also
// as an upcoming instance; and the node maps to its group.
func TestNodeRegisteredBeforeMachineProviderID(t *testing.T) {
	const providerID = "kwok-capi://ns/md-a-1"
	md := scalable("MachineDeployment", "md-a", sizes("0", "5"), 1)
	m := machine("md-a-1", map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": infraMachines.Group, "kind": "KwokMachine", "name": "md-a-1"},
	}, nil)
	m.SetLabels(map[string]string{DeploymentNameLabel: "md-a"})
	infra := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infraMachines.Group + "/" + infraMachines.Version, "kind": "KwokMachine",
		"metadata": map[string]any{"name": "md-a-1", "namespace": "ns"},
		"spec":     map[string]any{"providerID": providerID},
	}}
	listKinds := fakeListKinds()
	listKinds[infraMachines] = "KwokMachineList"
	discovery := infraDiscovery()
	for _, list := range discovery.Resources {
		if list.GroupVersion == infraMachines.Group+"/"+infraMachines.Version {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: infraMachines.Resource, Kind: "KwokMachine", Namespaced: true})
		}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, md, m, infra)
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProvider(ctx, Options{Client: client, Discovery: discovery})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup() })

	want := []cloudprovider.Instance{{Id: providerID}}
	var got []cloudprovider.Instance
	// The infrastructure kind's informer starts on the first read and syncs
	// in the background; until then the machine keeps its pending ID.
	err = wait.PollUntilContextTimeout(ctx, 0, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		if err := p.Refresh(); err != nil {
			return false, err
		}
		groups := p.NodeGroups()
		if len(groups) != 1 {
			t.Fatalf("%d node groups, want md-a only", len(groups))
		}
		got, err = groups[0].Nodes()
		if err != nil {
			return false, err
		}
		return cmp.Equal(ids(got), ids(want)), nil
	})
	if err != nil {
		t.Fatalf("instances %v, want the infrastructure machine's provider ID %v: %v", ids(got), ids(want), err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "md-a-1"}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	g, err := p.NodeGroupForNode(node)
	if err != nil || g == nil || g.Id() != groupID(kindMachineDeployment, "ns", "md-a") {
		t.Errorf("NodeGroupForNode = %v, %v; want md-a", g, err)
	}
}

func ids(instances []cloudprovider.Instance) []string {
	out := make([]string, 0, len(instances))
	for _, in := range instances {
		out = append(out, in.Id)
	}
	return out
}
