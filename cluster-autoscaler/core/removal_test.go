package core

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// removalGroup records which instances were deleted, and how.
type removalGroup struct {
	cloudprovider.NodeGroup
	calls []string
	// forceable is false for a provider without ForceDeleteNodes.
	forceable bool
}

func (g *removalGroup) Id() string { return "g" }
func (g *removalGroup) record(how string, nodes []*corev1.Node) {
	s := how + ":"
	for _, n := range nodes {
		s += " " + n.Spec.ProviderID
	}
	g.calls = append(g.calls, s)
}
func (g *removalGroup) DeleteNodes(nodes []*corev1.Node) error { g.record("delete", nodes); return nil }
func (g *removalGroup) ForceDeleteNodes(nodes []*corev1.Node) error {
	if !g.forceable {
		return cloudprovider.ErrNotImplemented
	}
	g.record("force", nodes)
	return nil
}

// TestRemoveFailedInstances: as upstream, late instances go down to the min
// size only and failed ones through DeleteNodes, unless the force flags ask
// for ForceDeleteNodes (DeleteNodes where a provider has none).
func TestRemoveFailedInstances(t *testing.T) {
	in := func(id string) cloudprovider.Instance { return cloudprovider.Instance{Id: id} }
	for _, tc := range []struct {
		name         string
		target, min  int
		forceFailed  bool
		forceLate    bool
		forceable    bool
		failed, late []cloudprovider.Instance
		want         []string
	}{
		{name: "late ones down to the min size", target: 3, min: 1, late: []cloudprovider.Instance{in("l1"), in("l2"), in("l3")},
			want: []string{"delete: l1 l2"}},
		{name: "none at the min size", target: 1, min: 1, late: []cloudprovider.Instance{in("l1")}, failed: []cloudprovider.Instance{in("f1")},
			want: []string{"delete: f1"}},
		{name: "forced late ones past the min size", target: 1, min: 1, forceLate: true, forceable: true,
			late: []cloudprovider.Instance{in("l1")}, failed: []cloudprovider.Instance{in("f1")}, want: []string{"force: l1", "delete: f1"}},
		{name: "forced failed ones", target: 2, min: 2, forceFailed: true, forceable: true, failed: []cloudprovider.Instance{in("f1")},
			want: []string{"force: f1"}},
		{name: "forced without ForceDeleteNodes", target: 2, min: 2, forceFailed: true, failed: []cloudprovider.Instance{in("f1")},
			want: []string{"delete: f1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &removalGroup{forceable: tc.forceable}
			a := &Autoscaler{opts: config.Options{ForceDeleteFailedNodes: tc.forceFailed, ForceDeleteUnregisteredNodes: tc.forceLate}}
			state := &clusterstate.State{Groups: []*clusterstate.GroupState{{Group: g, Target: tc.target, Min: tc.min, Failed: tc.failed, Late: tc.late}}}
			a.removeFailedInstances(context.Background(), state)
			if diff := cmp.Diff(tc.want, g.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}
