package clusterapi

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/cloudprovider"
)

func groupIDs(p *Provider) []string {
	var ids []string
	for _, g := range p.NodeGroups() {
		ids = append(ids, g.Id())
	}
	return ids
}

func withLabels(u *unstructured.Unstructured, cluster string, labels map[string]string) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, cluster, "spec", "clusterName")
	u.SetLabels(labels)
	return u
}

func inNamespace(u *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	u.SetNamespace(ns)
	return u
}

// TestAutoDiscovery: upstream's --node-group-auto-discovery examples, each
// selecting by namespace, Cluster and labels, several specs adding up.
func TestAutoDiscovery(t *testing.T) {
	objs := []runtime.Object{
		inNamespace(withLabels(scalable("MachineDeployment", "blue-a", sizes("1", "3"), 1), "test1", map[string]string{"color": "green", "shape": "square"}), "blue"),
		inNamespace(withLabels(scalable("MachineDeployment", "blue-b", sizes("1", "3"), 1), "purple", map[string]string{"owner": "jim"}), "blue"),
		inNamespace(withLabels(scalable("MachineDeployment", "staging-a", sizes("1", "3"), 1), "purple", map[string]string{"owner": "jim"}), "staging"),
		inNamespace(withLabels(scalable("MachineSet", "staging-b", sizes("1", "3"), 1), "test1", map[string]string{"color": "green"}), "staging"),
	}
	for _, tc := range []struct {
		specs []string
		want  []string
	}{
		{nil, []string{"MachineDeployment/blue/blue-a", "MachineDeployment/blue/blue-b", "MachineDeployment/staging/staging-a", "MachineSet/staging/staging-b"}},
		{[]string{"clusterapi:namespace=blue"}, []string{"MachineDeployment/blue/blue-a", "MachineDeployment/blue/blue-b"}},
		{[]string{"clusterapi:clusterName=test1"}, []string{"MachineDeployment/blue/blue-a", "MachineSet/staging/staging-b"}},
		{[]string{"clusterapi:color=green,shape=square"}, []string{"MachineDeployment/blue/blue-a"}},
		{[]string{"clusterapi:namespace=staging,clusterName=purple,owner=jim"}, []string{"MachineDeployment/staging/staging-a"}},
		{[]string{"clusterapi:namespace=blue,owner=jim", "clusterapi:color=green,namespace=staging"}, []string{"MachineDeployment/blue/blue-b", "MachineSet/staging/staging-b"}},
		{[]string{"clusterapi:namespace=nowhere"}, nil},
	} {
		p := newFakeProviderWith(t, Options{AutoDiscovery: tc.specs}, objs...)
		if diff := cmp.Diff(tc.want, groupIDs(p)); diff != "" {
			t.Errorf("%q: node groups (-want +got):\n%s", tc.specs, diff)
		}
	}
}

func TestAutoDiscoveryErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"clusterapi":                    `--node-group-auto-discovery "clusterapi": want clusterapi:key=value,key=value`,
		"asg:tag=k8s.io/cluster":        `--node-group-auto-discovery "asg:tag=k8s.io/cluster": unsupported discoverer "asg": the clusterapi provider takes clusterapi:...`,
		"clusterapi:namespace":          `--node-group-auto-discovery "clusterapi:namespace": "namespace" is not key=value`,
		"clusterapi:a=b=c":              `--node-group-auto-discovery "clusterapi:a=b=c": "a=b=c" is not key=value`,
		"clusterapi:namespace=a:b":      `--node-group-auto-discovery "clusterapi:namespace=a:b": want clusterapi:key=value,key=value`,
		"clusterapi:not a label=x":      `--node-group-auto-discovery "clusterapi:not a label=x": label "not a label=x": `,
		"clusterapi:namespace=ns,,x=y,": "",
	} {
		_, err := parseAutoDiscovery([]string{spec})
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", spec, err)
		case want != "" && (err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want):
			t.Errorf("%q: error %v, want %q...", spec, err, want)
		}
	}
	if diff := cmp.Diff([]string{"", "a", ""}, []string{
		watchNamespace(mustSpecs(t, "clusterapi:clusterName=x")),
		watchNamespace(mustSpecs(t, "clusterapi:namespace=a", "clusterapi:namespace=a,x=y")),
		watchNamespace(mustSpecs(t, "clusterapi:namespace=a", "clusterapi:namespace=b")),
	}); diff != "" {
		t.Errorf("watched namespaces (-want +got):\n%s", diff)
	}
}

func mustSpecs(t *testing.T, specs ...string) []discoverySpec {
	t.Helper()
	out, err := parseAutoDiscovery(specs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWhichGroups: like upstream, a paused group, a max size of 0, and a
// group at zero replicas that cannot tell its nodes' shape are no node groups.
func TestWhichGroups(t *testing.T) {
	paused := scalable("MachineDeployment", "paused", sizes("0", "3"), 1)
	paused.SetAnnotations(map[string]string{NodeGroupMinSizeAnnotation: "0", NodeGroupMaxSizeAnnotation: "3", PausedAnnotation: ""})
	zeroWithShape := sizes("0", "3")
	zeroWithShape[CPUAnnotation], zeroWithShape[MemoryAnnotation] = "2", "4Gi"
	p := newFakeProvider(t,
		paused,
		scalable("MachineDeployment", "max-zero", sizes("0", "0"), 0),
		scalable("MachineDeployment", "zero-no-shape", sizes("0", "3"), 0),
		scalable("MachineDeployment", "zero-with-shape", zeroWithShape, 0),
		scalable("MachineDeployment", "one-no-shape", sizes("0", "3"), 1),
	)
	want := []string{"MachineDeployment/ns/one-no-shape", "MachineDeployment/ns/zero-with-shape"}
	if diff := cmp.Diff(want, groupIDs(p)); diff != "" {
		t.Errorf("node groups (-want +got):\n%s", diff)
	}
}

// TestRefreshReadsTheInformers: the informers list once; loops after that
// make no LIST of their own.
func TestRefreshReadsTheInformers(t *testing.T) {
	listKinds := map[schema.GroupVersionResource]string{
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinedeployments"}: "MachineDeploymentList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinesets"}:        "MachineSetList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machinepools"}:       "MachinePoolList",
		{Group: APIGroup, Version: DefaultAPIVersion, Resource: "machines"}:           "MachineList",
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		scalable("MachineDeployment", "md", sizes("1", "3"), 1), machine("m", nil, nil))
	p, err := NewProvider(t.Context(), Options{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup()
	lists := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "list" {
				n++
			}
		}
		return n
	}
	before := lists()
	if before != 4 {
		t.Fatalf("%d LISTs to start, want one per kind (4)", before)
	}
	for range 5 {
		if err := p.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if after := lists(); after != before {
		t.Errorf("Refresh listed %d more times", after-before)
	}
}

// TestMachinePool: a MachinePool is a node group whose instances are its
// providerIDList, and whose nodes map to it by provider ID.
func TestMachinePool(t *testing.T) {
	pool := scalable("MachinePool", "mp", sizes("0", "5"), 3)
	_ = unstructured.SetNestedStringSlice(pool.Object, []string{"kwok://a", "kwok://b"}, "spec", "providerIDList")
	p := newFakeProvider(t, pool)
	if diff := cmp.Diff([]string{"MachinePool/ns/mp"}, groupIDs(p)); diff != "" {
		t.Fatalf("node groups (-want +got):\n%s", diff)
	}
	g := p.NodeGroups()[0]
	instances, err := g.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	running := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	if diff := cmp.Diff([]cloudprovider.Instance{{Id: "kwok://a", Status: running}, {Id: "kwok://b", Status: running}}, instances); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	if got, _ := p.NodeGroupForNode(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "kwok://b"}}); got == nil || got.Id() != "MachinePool/ns/mp" {
		t.Errorf("NodeGroupForNode(kwok://b) = %v", got)
	}
	if size, _ := g.TargetSize(); size != 3 {
		t.Errorf("target %d, want 3", size)
	}
}

// infraDiscovery serves cluster.x-k8s.io and the kwok templates.
func infraDiscovery() *discoveryfake.FakeDiscovery {
	return &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: APIGroup + "/" + DefaultAPIVersion, APIResources: []metav1.APIResource{
			{Name: "machinedeployments", Kind: "MachineDeployment", Namespaced: true},
			{Name: "machinesets", Kind: "MachineSet", Namespaced: true},
			{Name: "machines", Kind: "Machine", Namespaced: true},
		}},
		{GroupVersion: infraTemplates.Group + "/" + infraTemplates.Version, APIResources: []metav1.APIResource{
			{Name: infraTemplates.Resource, Kind: "KwokMachineTemplate", Namespaced: true},
		}},
	}}}
}

func infraTemplate(capacity map[string]any, nodeInfo map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infraTemplates.Group + "/" + infraTemplates.Version, "kind": "KwokMachineTemplate",
		"metadata": map[string]any{"name": "infra", "namespace": "ns"},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
		"status":   map[string]any{"capacity": capacity},
	}}
	if nodeInfo != nil {
		u.Object["status"].(map[string]any)["nodeInfo"] = nodeInfo
	}
	return u
}

func withInfraRef(u *unstructured.Unstructured) *unstructured.Unstructured {
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"apiGroup": infraTemplates.Group, "kind": "KwokMachineTemplate", "name": "infra"},
		"spec", "template", "spec", "infrastructureRef")
	return u
}

// TestTemplateLayers: the infrastructure template's status, then upstream's
// annotations over it, then an existing node of the group over both.
func TestTemplateLayers(t *testing.T) {
	infra := infraTemplate(map[string]any{"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1", "bogus": "lots"},
		map[string]any{"architecture": "arm64", "operatingSystem": "linux"})
	q := resource.MustParse
	equateQuantities := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

	t.Run("infrastructure status alone", func(t *testing.T) {
		p := newFakeProviderWith(t, Options{Discovery: infraDiscovery()}, infra, withInfraRef(scalable("MachineDeployment", "md", sizes("0", "5"), 0)))
		info, err := p.NodeGroups()[0].TemplateNodeInfo()
		if err != nil {
			t.Fatal(err)
		}
		want := corev1.ResourceList{"cpu": q("4"), "memory": q("16Gi"), "nvidia.com/gpu": q("1"), "pods": q("110")}
		if diff := cmp.Diff(want, info.Node.Status.Capacity, equateQuantities); diff != "" {
			t.Errorf("capacity (-want +got):\n%s", diff)
		}
		if got := info.Node.Labels[corev1.LabelArchStable]; got != "arm64" || info.Node.Status.NodeInfo.Architecture != "arm64" {
			t.Errorf("architecture %q, node info %+v", got, info.Node.Status.NodeInfo)
		}
	})
	t.Run("annotations win over the infrastructure", func(t *testing.T) {
		a := sizes("0", "5")
		a[CPUAnnotation], a[MaxPodsAnnotation] = "8", "50"
		p := newFakeProviderWith(t, Options{Discovery: infraDiscovery()}, infra, withInfraRef(scalable("MachineDeployment", "md", a, 0)))
		info, err := p.NodeGroups()[0].TemplateNodeInfo()
		if err != nil {
			t.Fatal(err)
		}
		want := corev1.ResourceList{"cpu": q("8"), "memory": q("16Gi"), "nvidia.com/gpu": q("1"), "pods": q("50")}
		if diff := cmp.Diff(want, info.Node.Status.Capacity, equateQuantities); diff != "" {
			t.Errorf("capacity (-want +got):\n%s", diff)
		}
	})
	t.Run("an existing node wins over both", func(t *testing.T) {
		a := sizes("0", "5")
		a[CPUAnnotation] = "8"
		m := machine("md-1", map[string]any{"providerID": "kwok://n1"}, map[string]any{"nodeRef": map[string]any{"name": "n1"}})
		m.SetLabels(map[string]string{DeploymentNameLabel: "md"})
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1", "pool": "real"},
				Annotations: map[string]string{MachineAnnotation: "md-1"}},
			Spec: corev1.NodeSpec{ProviderID: "kwok://n1", Taints: []corev1.Taint{
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "DeletionCandidateOfClusterAutoscaler", Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
				{Key: "startup-taint.cluster-autoscaler.kubernetes.io/cni", Effect: corev1.TaintEffectNoSchedule},
			}},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{"cpu": q("6"), "memory": q("12Gi"), "pods": q("110")},
				Allocatable: corev1.ResourceList{"cpu": q("5800m"), "memory": q("11Gi"), "pods": q("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		if err := nodes.Add(node); err != nil {
			t.Fatal(err)
		}
		p := newFakeProviderWith(t, Options{Discovery: infraDiscovery(), Nodes: corelisters.NewNodeLister(nodes)},
			infra, m, withInfraRef(scalable("MachineDeployment", "md", a, 1)))
		info, err := p.NodeGroups()[0].TemplateNodeInfo()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(node.Status.Allocatable, info.Node.Status.Allocatable, equateQuantities); diff != "" {
			t.Errorf("allocatable (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"kubernetes.io/hostname": "md-template", "pool": "real"}, info.Node.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}, info.Node.Spec.Taints); diff != "" {
			t.Errorf("taints (-want +got):\n%s", diff)
		}
		if info.Node.Spec.ProviderID != "" || len(info.Node.Annotations) > 0 {
			t.Errorf("the template keeps the node's own identity: %+v", info.Node.ObjectMeta)
		}
	})
	t.Run("no infrastructure template", func(t *testing.T) {
		p := newFakeProviderWith(t, Options{Discovery: infraDiscovery()}, withInfraRef(scalable("MachineDeployment", "md", sizes("0", "5"), 1)))
		if _, err := p.NodeGroups()[0].TemplateNodeInfo(); !errors.Is(err, cloudprovider.ErrNotImplemented) {
			t.Errorf("error %v, want ErrNotImplemented", err)
		}
	})
}
