package oracle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCapacityQuota(t *testing.T) {
	pool := map[string]string{"pool": "a"}
	for _, tc := range []struct {
		name  string
		steps func(o *Oracle)
		want  []string
	}{
		{
			name: "cpu counts whole cores per node, rounded up",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, matchLabels("pool", "a"), "cpu=3"))
				o.SetNode(testNode("n1", 5, pool, "cpu=1500m"))
				o.SetNode(testNode("n2", 6, pool, "cpu=1500m")) // 3 cpu exactly, but 2+2 cores
			},
			want: []string{"CapacityQuota q: 2 node(s) registered since its last change (10:00:00) have cpu 4, over its limit 3; on node n2 registered or changed"},
		},
		{
			name: "memory counts bytes",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, "memory=16Gi"))
				o.SetNode(testNode("n1", 5, nil, "memory=8Gi"))
				o.SetNode(testNode("n2", 6, nil, "memory=8Gi"))
				o.SetNode(testNode("n3", 7, nil, "memory=1"))
			},
			want: []string{"CapacityQuota q: 3 node(s) registered since its last change (10:00:00) have memory 17179869185, over its limit 16Gi; on node n3 registered or changed"},
		},
		{
			name: "nodes count one each; a resource the node lacks counts zero",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, "nodes=1", "nvidia.com/gpu=0"))
				o.SetNode(testNode("n1", 5, nil, "cpu=4"))
				o.SetNode(testNode("n2", 6, nil, "cpu=4"))
			},
			want: []string{"CapacityQuota q: 2 node(s) registered since its last change (10:00:00) have nodes 2, over its limit 1; on node n2 registered or changed"},
		},
		{
			name: "virtual-kubelet nodes count toward nothing",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, "nodes=1"))
				o.SetNode(testNode("n1", 5, nil, "cpu=4"))
				o.SetNode(testNode("virtual", 6, map[string]string{"type": "virtual-kubelet"}, "cpu=1M"))
			},
		},
		{
			name: "only selected nodes count",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}, "nodes=1"))
				o.SetNode(testNode("a1", 5, pool, "cpu=4"))
				o.SetNode(testNode("c1", 6, map[string]string{"pool": "c"}, "cpu=4"))
				o.SetNode(testNode("none", 7, nil, "cpu=4"))
			},
		},
		{
			name: "nodes from before the quota's last change do not count",
			steps: func(o *Oracle) {
				o.SetNode(testNode("old1", 1, nil, "cpu=4"))
				o.SetNode(testNode("old2", 2, nil, "cpu=4"))
				// Created at 0, lowered to one node at 3: the two old nodes stay.
				o.SetCapacityQuota(written(testQuota("q", 0, nil, "nodes=1"), 3, ""))
				o.SetNode(testNode("same-second", 3, nil, "cpu=4"))
				o.SetNode(testNode("new1", 4, nil, "cpu=4"))
				o.SetNode(testNode("new2", 5, nil, "cpu=4"))
			},
			want: []string{"CapacityQuota q: 2 node(s) registered since its last change (10:00:03) have nodes 2, over its limit 1; on node new2 registered or changed"},
		},
		{
			name: "a status write is not a change of the quota",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, "nodes=1"))
				o.SetNode(testNode("n1", 5, nil, "cpu=4"))
				o.SetCapacityQuota(written(testQuota("q", 0, nil, "nodes=1"), 9, "status"))
				o.SetNode(testNode("n2", 10, nil, "cpu=4"))
			},
			want: []string{"CapacityQuota q: 2 node(s) registered since its last change (10:00:00) have nodes 2, over its limit 1; on node n2 registered or changed"},
		},
		{
			name: "a violation is reported when it starts, and again after it ended",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, "nodes=1"))
				o.SetNode(testNode("n1", 5, nil, "cpu=4"))
				o.SetNode(testNode("n2", 6, nil, "cpu=4"))
				o.SetNode(testNode("n2", 6, map[string]string{"heartbeat": "1"}, "cpu=4"))
				o.SetCapacityQuota(written(testQuota("q", 0, nil, "nodes=1"), 7, "status"))
				o.DeleteNode("n2")
				o.SetNode(testNode("n3", 8, nil, "cpu=4"))
			},
			want: []string{
				"CapacityQuota q: 2 node(s) registered since its last change (10:00:00) have nodes 2, over its limit 1; on node n2 registered or changed",
				"CapacityQuota q: 2 node(s) registered since its last change (10:00:00) have nodes 2, over its limit 1; on node n3 registered or changed",
			},
		},
		{
			name: "invalid quotas are not judged",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("instance-type", 0, matchLabels("node.kubernetes.io/instance-type", "big"), "nodes=0"))
				o.SetCapacityQuota(testQuota("instance-type-expression", 0, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "beta.kubernetes.io/instance-type", Operator: metav1.LabelSelectorOpExists}}}, "nodes=0"))
				o.SetCapacityQuota(testQuota("operator", 0, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "pool", Operator: "Near", Values: []string{"a"}}}}, "nodes=0"))
				o.SetCapacityQuota(testQuota("fraction", 0, nil, "cpu=500m"))
				o.SetCapacityQuota(testQuota("negative", 0, nil, "cpu=-1"))
				o.SetNode(testNode("n1", 5, map[string]string{"node.kubernetes.io/instance-type": "big", "pool": "a"}, "cpu=4"))
			},
		},
		{
			name: "a deleted quota is no longer judged",
			steps: func(o *Oracle) {
				o.SetCapacityQuota(testQuota("q", 0, nil, "nodes=0"))
				o.DeleteCapacityQuota("q")
				o.SetNode(testNode("n1", 5, nil, "cpu=4"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := New()
			tc.steps(o)
			if diff := cmp.Diff(tc.want, o.Violations(noPreemptors)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
