package core

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/processors/capacityquota"
)

// TestBalanceHandsCappedShareToSimilarGroups: two identical groups in two zones;
// a quota allows zone a one node. Four nodes are needed: zone a gets its one, zone
// b the other three, where upstream would stop at an even split.
func TestBalanceHandsCappedShareToSimilarGroups(t *testing.T) {
	f := &loopFixture{provider: &fakeProvider{}}
	for _, zone := range []string{"a", "b"} {
		tmpl := node("template-"+zone, "zone-"+zone, "4", "16Gi")
		tmpl.Labels["topology.kubernetes.io/zone"] = zone
		// Only the zone tells the two shapes apart.
		delete(tmpl.Labels, "group")
		f.provider.groups = append(f.provider.groups, &fakeGroup{id: "zone-" + zone, max: 10, template: tmpl})
	}
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := 0; i < 4; i++ {
		// 3-cpu pods: one per 4-cpu node.
		_ = podIdx.Add(testPod("ns", "pending-"+string(rune('a'+i)), "rs", "3", ""))
	}
	f.pods = corelisters.NewPodLister(podIdx)
	f.nodes = corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))

	quota := &autoscalingv1beta1.CapacityQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-a", ResourceVersion: "1"},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"topology.kubernetes.io/zone": "a"}},
			Limits:   autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{"nodes": resource.MustParse("1")}},
		},
	}
	limiter, err := capacityquota.New(capacityquota.Options{Enabled: true},
		func() ([]*autoscalingv1beta1.CapacityQuota, error) {
			return []*autoscalingv1beta1.CapacityQuota{quota}, nil
		},
		nil, nil, capacityquota.NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAutoscaler(t, f, limiter)
	a.opts.BalanceSimilarNodeGroups = true
	if err := a.RunOnce(context.Background(), time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"zone-a": 1, "zone-b": 3}, targets(f)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}
