package capacityquota

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/gang"
)

// TestGangCappedCountsByQuotaAndResource: a gang the quota's headroom left
// without nodes is counted under the quota and the resource, with no series
// of its own that would outlive it; a group whose headroom no quota held
// back counts nothing.
func TestGangCappedCountsByQuotaAndResource(t *testing.T) {
	quota := seedQuota("8")
	reg := prometheus.NewRegistry()
	p, err := New(Options{Enabled: true}, func() ([]*autoscalingv1beta1.CapacityQuota, error) {
		return []*autoscalingv1beta1.CapacityQuota{quota}, nil
	}, nil, nil, NewMetrics(reg, nil))
	if err != nil {
		t.Fatal(err)
	}
	capped, free := group{id: "capped"}, group{id: "free"}
	template := seedNode("template")
	other := seedNode("other")
	other.Labels = nil
	lc := &processors.LoopContext{
		Now:       time.Unix(0, 0),
		Groups:    []cloudprovider.NodeGroup{capped, free},
		Templates: map[string]*cloudprovider.NodeInfo{"capped": {Node: template}, "free": {Node: other}},
	}
	ctx := context.Background()
	if err := p.StartLoop(ctx, lc); err != nil {
		t.Fatal(err)
	}
	train := gang.Gang{Key: gang.Key{Kind: gang.KindPodGroup, Namespace: "ml", Name: "train"}, MinCount: 5}
	if n, _ := p.Headroom(ctx, lc, capped, template, 10); n != 4 {
		t.Fatalf("headroom = %d, want 4", n)
	}
	p.GangCapped(ctx, lc, capped, train)
	if n, _ := p.Headroom(ctx, lc, free, other, 10); n != 10 {
		t.Fatalf("headroom of a group no quota selects = %d, want 10", n)
	}
	p.GangCapped(ctx, lc, free, train)
	want := `
# HELP quotascale_capacity_quota_gang_scale_up_skipped_total Gangs given no node of a node group because a CapacityQuota allowed fewer nodes than the gang needs, by quota and resource.
# TYPE quotascale_capacity_quota_gang_scale_up_skipped_total counter
quotascale_capacity_quota_gang_scale_up_skipped_total{quota="test-capacityquota",resource="cpu"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "quotascale_capacity_quota_gang_scale_up_skipped_total"); err != nil {
		t.Error(err)
	}
}
