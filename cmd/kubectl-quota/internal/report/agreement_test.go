package report

import (
	"testing"

	"github.com/quotascale/quotascale/pkg/nodetemplate/nodetemplatetest"
)

// TestNodeGroupOfTheMixedCluster: kubectl-quota models the shared mixed
// cluster's next node on the node, with the taints, that the autoscaler's core
// and its Cluster API provider use, and counts the upcoming nodes the
// autoscaler's registry counts (nodetemplatetest). Before, it took the oldest
// node, ready or not, and counted target - registered.
func TestNodeGroupOfTheMixedCluster(t *testing.T) {
	c := nodetemplatetest.Mixed(now)
	status := NodeGroupStatus{Name: nodetemplatetest.GroupID, MaxSize: 10, Target: c.Target, Registered: len(c.Nodes),
		Unregistered: len(c.Unregistered) + len(c.Late)}
	groups := nodeGroups(autoscalerWith(status), c.Nodes)
	if len(groups) != 1 || groups[0].template == nil {
		t.Fatalf("groups %+v, want one with a template", groups)
	}
	g := groups[0]
	c.CheckTemplate(t, g.template)
	if g.template.Name != c.WantExample {
		t.Errorf("template named %s, want %s", g.template.Name, c.WantExample)
	}
	if g.upcoming != c.WantUpcoming {
		t.Errorf("upcoming %d, want %d", g.upcoming, c.WantUpcoming)
	}
}

// TestUpcomingAfterTheStatus: nodes that registered after the autoscaler
// wrote its status are not counted again as unregistered instances.
func TestUpcomingAfterTheStatus(t *testing.T) {
	tests := []struct {
		name                                     string
		target, registered, unregistered, listed int
		want                                     int
	}{
		{"as the status says", 5, 2, 1, 2, 3},
		{"instances outlive a lowered target", 2, 2, 3, 2, 3},
		{"two of three instances registered since", 2, 2, 3, 4, 1},
		{"more registered than the status knew of", 4, 1, 1, 3, 1},
	}
	for _, tt := range tests {
		status := NodeGroupStatus{Name: seedGroup, Target: tt.target, Registered: tt.registered, Unregistered: tt.unregistered}
		groups := nodeGroups(autoscalerWith(status), seedNodes(tt.listed))
		if got := groups[0].upcoming; got != tt.want {
			t.Errorf("%s: upcoming %d, want %d", tt.name, got, tt.want)
		}
	}
}
