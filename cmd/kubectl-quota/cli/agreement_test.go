package cli

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cmd/kubectl-quota/internal/report"
	"github.com/quotascale/quotascale/pkg/nodetemplate/nodetemplatetest"
)

type mixedGroup struct {
	cloudprovider.NodeGroup
	target    int
	instances []cloudprovider.Instance
}

func (g *mixedGroup) Id() string                               { return nodetemplatetest.GroupID }
func (g *mixedGroup) MinSize() int                             { return 0 }
func (g *mixedGroup) MaxSize() int                             { return 10 }
func (g *mixedGroup) Exist() bool                              { return true }
func (g *mixedGroup) TargetSize() (int, error)                 { return g.target, nil }
func (g *mixedGroup) Nodes() ([]cloudprovider.Instance, error) { return g.instances, nil }

type mixedProvider struct {
	cloudprovider.CloudProvider
	group *mixedGroup
}

func (p mixedProvider) NodeGroups() []cloudprovider.NodeGroup {
	return []cloudprovider.NodeGroup{p.group}
}

// TestUpcomingOfTheMixedCluster: the autoscaler's registry counts the shared
// mixed cluster's upcoming nodes and writes its status; kubectl-quota, reading
// that status and the same nodes, counts the same upcoming nodes and names the
// same template node (nodetemplatetest).
func TestUpcomingOfTheMixedCluster(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := nodetemplatetest.Mixed(start)
	running := func(id string) cloudprovider.Instance {
		return cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}}
	}
	group := &mixedGroup{target: c.Target}
	for _, id := range c.Late {
		group.instances = append(group.instances, running(id))
	}
	registry := clusterstate.NewRegistry(clusterstate.Options{MaxNodeProvisionTime: 15 * time.Minute})
	// The late instances are first seen a provisioning time before the rest.
	if _, err := registry.Update(context.Background(), mixedProvider{group: group}, c.Nodes, start.Add(-20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		group.instances = append(group.instances, running(n.Spec.ProviderID))
	}
	for _, id := range c.Unregistered {
		group.instances = append(group.instances, running(id))
	}
	state, err := registry.Update(context.Background(), mixedProvider{group: group}, c.Nodes, start)
	if err != nil {
		t.Fatal(err)
	}
	if got := state.Group(nodetemplatetest.GroupID).Upcoming; got != c.WantUpcoming {
		t.Fatalf("the registry counts %d upcoming nodes, want %d", got, c.WantUpcoming)
	}
	health := registry.CheckHealth(clusterstate.HealthOptions{MaxTotalUnreadyPercentage: 45, OkTotalUnreadyCount: 3,
		MaxNodeStartupTime: 15 * time.Minute}, state, c.Nodes)
	status := registry.Status(health, nil, api.Status{})
	status.Time = start.Format(statusTimeLayout)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending", UID: "pending"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	snap := report.Snapshot{Now: start, Nodes: c.Nodes, NodesListed: true,
		Autoscaler: autoscalerStatus("ConfigMap kube-system/cluster-autoscaler-status", status)}
	explained := report.Explain(snap, pod, 5)
	if explained.Capacity == nil || len(explained.Capacity.NodeGroups) != 1 {
		t.Fatalf("capacity explanation %+v, want one node group", explained.Capacity)
	}
	fit := explained.Capacity.NodeGroups[0]
	if fit.Upcoming != c.WantUpcoming || fit.Template != c.WantExample {
		t.Errorf("kubectl-quota: %d upcoming nodes like %s, want %d like %s", fit.Upcoming, fit.Template, c.WantUpcoming, c.WantExample)
	}
}
