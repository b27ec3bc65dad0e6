package clusterapi

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/quotascale/quotascale/pkg/nodetemplate/nodetemplatetest"
)

// TestTemplateOfTheMixedCluster: the provider's template of the shared mixed
// cluster is made from the node, and has the taints, that the core and
// kubectl-quota use too (nodetemplatetest).
func TestTemplateOfTheMixedCluster(t *testing.T) {
	c := nodetemplatetest.Mixed(time.Now())
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	objs := []runtime.Object{scalable("MachineDeployment", nodetemplatetest.DeploymentName, sizes("0", "10"), int64(c.Target))}
	for _, n := range c.Nodes {
		if err := nodes.Add(n); err != nil {
			t.Fatal(err)
		}
		m := machine(n.Name, map[string]any{"providerID": n.Spec.ProviderID}, map[string]any{"nodeRef": map[string]any{"name": n.Name}})
		m.SetLabels(map[string]string{DeploymentNameLabel: nodetemplatetest.DeploymentName})
		objs = append(objs, m)
	}
	p := newFakeProviderWith(t, Options{Nodes: corelisters.NewNodeLister(nodes)}, objs...)
	groups := p.NodeGroups()
	if len(groups) != 1 || groups[0].Id() != nodetemplatetest.GroupID {
		t.Fatalf("groups %v, want one, %s", groupIDs(p), nodetemplatetest.GroupID)
	}
	info, err := groups[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	c.CheckTemplate(t, info.Node)
}
