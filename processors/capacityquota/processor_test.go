package capacityquota

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
)

type group struct {
	cloudprovider.NodeGroup
	id string
}

func (g group) Id() string { return g.id }

func seedNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cloud.google.com/compute-class": "test-capacityquota-class"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		},
	}
}

func seedQuota(limit string) *autoscalingv1beta1.CapacityQuota {
	return &autoscalingv1beta1.CapacityQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "test-capacityquota", ResourceVersion: limit, Generation: 1},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"cloud.google.com/compute-class": "test-capacityquota-class"}},
			Limits:   autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{"cpu": resource.MustParse(limit)}},
		},
	}
}

// TestUpcomingAndPlannedCount: registered nodes, upcoming nodes and the nodes
// planned earlier in the loop all count against the quota.
func TestUpcomingAndPlannedCount(t *testing.T) {
	quota := seedQuota("8")
	reg := prometheus.NewRegistry()
	p, err := New(Options{Enabled: true}, func() ([]*autoscalingv1beta1.CapacityQuota, error) {
		return []*autoscalingv1beta1.CapacityQuota{quota}, nil
	}, nil, nil, NewMetrics(reg, nil))
	if err != nil {
		t.Fatal(err)
	}
	p.onNode(seedNode("registered-1"), false)
	g := group{id: "grp"}
	template := seedNode("template")
	lc := &processors.LoopContext{
		Now:       time.Unix(0, 0),
		Groups:    []cloudprovider.NodeGroup{g},
		Templates: map[string]*cloudprovider.NodeInfo{"grp": {Node: template}},
		Upcoming:  map[string]int{"grp": 1},
	}
	ctx := context.Background()
	if err := p.StartLoop(ctx, lc); err != nil {
		t.Fatal(err)
	}
	// 8 cpu, 2 per node, 1 registered + 1 upcoming: 2 more.
	n, reasons := p.Headroom(ctx, lc, g, template, 5)
	want := []processors.Reason{processors.NewReason(processors.MessageNodeGroupSkipped, `exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`)}
	if n != 2 || !cmp.Equal(want, reasons) {
		t.Fatalf("headroom = %d %+v, want 2 %+v", n, reasons, want)
	}
	p.Planned(ctx, lc, g, template, 2)
	if n, _ := p.Headroom(ctx, lc, g, template, 5); n != 0 {
		t.Fatalf("headroom after planning 2 = %d, want 0", n)
	}
	if got := testutil.ToFloat64(p.metrics.blockedTotal.WithLabelValues("test-capacityquota", "cpu", "grp")); got != 2 {
		t.Errorf("blocked counter = %v, want 2", got)
	}
	statuses := p.Statuses()
	if len(statuses) != 1 {
		t.Fatalf("statuses = %+v", statuses)
	}
	got := desiredStatus(statuses[0].Object, statuses[0].Quota, statuses[0].DeviceClassMissing, statuses[0].DeviceNotes)
	if cpu := got.Used.Resources["cpu"]; cpu.String() != "2" {
		t.Errorf("status.used cpu = %s, want 2 (registered nodes only)", cpu.String())
	}
	if c := got.Conditions[0]; c.Type != autoscalingv1beta1.ValidCondition || c.Status != metav1.ConditionTrue || c.Message != "CapacityQuota is valid" {
		t.Errorf("condition %+v", c)
	}
}

// TestUpcomingFollowsTheLoop: each loop replaces every group's upcoming nodes;
// a group the provider no longer reports, or that has lost its template,
// counts nothing any more, and planned nodes last one loop only.
func TestUpcomingFollowsTheLoop(t *testing.T) {
	template := &cloudprovider.NodeInfo{Node: seedNode("template")}
	a, b := group{id: "a"}, group{id: "b"}
	type loop struct {
		groups    []cloudprovider.NodeGroup
		templates map[string]*cloudprovider.NodeInfo
		upcoming  map[string]int
		planned   map[string]int // Planned calls after StartLoop
		// headroom of a new group under the 8 cpu quota (2 cpu per node).
		want int
	}
	for _, tc := range []struct {
		name  string
		loops []loop
	}{
		{"the upcoming count, not instances, is what counts", []loop{
			{groups: []cloudprovider.NodeGroup{a}, templates: map[string]*cloudprovider.NodeInfo{"a": template}, upcoming: map[string]int{"a": 3}, want: 1},
		}},
		{"a group that disappears leaves nothing behind", []loop{
			{groups: []cloudprovider.NodeGroup{a, b}, templates: map[string]*cloudprovider.NodeInfo{"a": template, "b": template}, upcoming: map[string]int{"a": 2, "b": 1}, want: 1},
			{groups: []cloudprovider.NodeGroup{b}, templates: map[string]*cloudprovider.NodeInfo{"b": template}, upcoming: map[string]int{"b": 1}, want: 3},
		}},
		{"a group that loses its template leaves nothing behind", []loop{
			{groups: []cloudprovider.NodeGroup{a}, templates: map[string]*cloudprovider.NodeInfo{"a": template}, upcoming: map[string]int{"a": 4}, want: 0},
			{groups: []cloudprovider.NodeGroup{a}, templates: map[string]*cloudprovider.NodeInfo{}, upcoming: map[string]int{"a": 4}, want: 4},
		}},
		{"planned nodes count in their loop only", []loop{
			{groups: []cloudprovider.NodeGroup{a}, templates: map[string]*cloudprovider.NodeInfo{"a": template}, planned: map[string]int{"a": 3}, want: 1},
			{groups: []cloudprovider.NodeGroup{a}, templates: map[string]*cloudprovider.NodeInfo{"a": template}, upcoming: map[string]int{"a": 1}, want: 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quota := seedQuota("8")
			p, err := New(Options{Enabled: true}, func() ([]*autoscalingv1beta1.CapacityQuota, error) {
				return []*autoscalingv1beta1.CapacityQuota{quota}, nil
			}, nil, nil, NewMetrics(prometheus.NewRegistry(), nil))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i, l := range tc.loops {
				lc := &processors.LoopContext{Groups: l.groups, Templates: l.templates, Upcoming: l.upcoming}
				if err := p.StartLoop(ctx, lc); err != nil {
					t.Fatal(err)
				}
				for id, n := range l.planned {
					p.Planned(ctx, lc, group{id: id}, template.Node, n)
				}
				if got, _ := p.Headroom(ctx, lc, group{id: "new"}, seedNode("new"), 10); got != l.want {
					t.Errorf("loop %d: headroom %d, want %d", i, got, l.want)
				}
			}
		})
	}
}

func TestInvalidQuotaIsReportedAndNotEnforced(t *testing.T) {
	quota := seedQuota("8")
	quota.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"node.kubernetes.io/instance-type": "n2-standard-2"}}
	p, err := New(Options{Enabled: true}, func() ([]*autoscalingv1beta1.CapacityQuota, error) {
		return []*autoscalingv1beta1.CapacityQuota{quota}, nil
	}, nil, nil, NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	template := seedNode("template")
	template.Labels["node.kubernetes.io/instance-type"] = "n2-standard-2"
	lc := &processors.LoopContext{Templates: map[string]*cloudprovider.NodeInfo{}}
	if err := p.StartLoop(context.Background(), lc); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.Headroom(context.Background(), lc, group{id: "grp"}, template, 10); n != 10 {
		t.Errorf("an invalid quota capped the scale-up to %d", n)
	}
	got := desiredStatus(quota, p.Statuses()[0].Quota, false, nil)
	if c := got.Conditions[0]; c.Status != metav1.ConditionFalse || c.Message != `selector must not use label key "node.kubernetes.io/instance-type"` || got.Used != nil {
		t.Errorf("status %+v", got)
	}
}

func TestSkipReason(t *testing.T) {
	for in, want := range map[string]string{
		"cpu":            "CpuResourceLimit",
		"memory":         "MemoryResourceLimit",
		"nvidia.com/gpu": "NvidiaComGpuResourceLimit",
		"nodes":          "NodesResourceLimit",
	} {
		if got := skipReason(in); got != want {
			t.Errorf("skipReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClusterWideQuota(t *testing.T) {
	p, err := New(Options{Enabled: false, ClusterWide: autoscalingv1beta1.ResourceList{"nodes": resource.MustParse("3")}},
		func() ([]*autoscalingv1beta1.CapacityQuota, error) {
			return []*autoscalingv1beta1.CapacityQuota{seedQuota("2")}, nil
		},
		nil, nil, NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	p.onNode(seedNode("n1"), false)
	lc := &processors.LoopContext{Templates: map[string]*cloudprovider.NodeInfo{}}
	if err := p.StartLoop(context.Background(), lc); err != nil {
		t.Fatal(err)
	}
	n, reasons := p.Headroom(context.Background(), lc, group{id: "grp"}, seedNode("t"), 5)
	want := []processors.Reason{processors.NewReason(processors.MessageNodeGroupSkipped, `exceeded quota: "CapacityQuota/cluster-wide", resources: nodes`)}
	// CapacityQuota objects are off: only the cluster-wide 3 nodes bind.
	if n != 2 || !cmp.Equal(want, reasons) {
		t.Errorf("headroom = %d %+v, want 2 %+v", n, reasons, want)
	}
}

// TestQuotaWrites: a status write (new resource version, same generation)
// hands the newer object to the status writer, which compares against its
// status; a spec change (new generation) is enforced in the next loop.
func TestQuotaWrites(t *testing.T) {
	quota := seedQuota("8")
	p, err := New(Options{Enabled: true}, func() ([]*autoscalingv1beta1.CapacityQuota, error) {
		return []*autoscalingv1beta1.CapacityQuota{quota}, nil
	}, nil, nil, NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	p.onNode(seedNode("registered-1"), false)
	g, template := group{id: "grp"}, seedNode("template")
	lc := &processors.LoopContext{
		Groups:    []cloudprovider.NodeGroup{g},
		Templates: map[string]*cloudprovider.NodeInfo{"grp": {Node: template}},
	}
	ctx := context.Background()
	loop := func(wantHeadroom int) {
		t.Helper()
		if err := p.StartLoop(ctx, lc); err != nil {
			t.Fatal(err)
		}
		if n, _ := p.Headroom(ctx, lc, g, template, 10); n != wantHeadroom {
			t.Errorf("headroom = %d, want %d", n, wantHeadroom)
		}
		if got := p.Statuses()[0].Object; got != quota {
			t.Errorf("the status writer sees resource version %s, want %s", got.ResourceVersion, quota.ResourceVersion)
		}
	}
	loop(3) // 8 cpu, 2 used, 2 per node

	written := quota.DeepCopy()
	written.ResourceVersion = "9"
	written.Status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: autoscalingv1beta1.ResourceList{"cpu": resource.MustParse("2")}}
	quota = written
	loop(3)

	raised := quota.DeepCopy()
	raised.ResourceVersion, raised.Generation = "10", 2
	raised.Spec.Limits.Resources["cpu"] = resource.MustParse("12")
	quota = raised
	loop(5)
}

// TestVirtualKubeletNodesCountTowardNothing: as upstream, a node labelled
// type=virtual-kubelet counts toward no CapacityQuota and no cluster-wide
// limit; relabelling a counted node so stops it counting.
func TestVirtualKubeletNodesCountTowardNothing(t *testing.T) {
	p, err := New(Options{Enabled: true, ClusterWide: autoscalingv1beta1.ResourceList{"nodes": resource.MustParse("3")}},
		func() ([]*autoscalingv1beta1.CapacityQuota, error) {
			return []*autoscalingv1beta1.CapacityQuota{seedQuota("8")}, nil
		},
		nil, nil, NewMetrics(prometheus.NewRegistry(), nil))
	if err != nil {
		t.Fatal(err)
	}
	virtual := func(name string) *corev1.Node {
		n := seedNode(name)
		n.Labels["type"] = "virtual-kubelet"
		return n
	}
	p.onNode(virtual("vk-1"), false)
	p.onNode(virtual("vk-2"), false)
	p.onNode(seedNode("real-1"), false)
	p.onNode(virtual("real-1"), false) // relabelled
	lc := &processors.LoopContext{Templates: map[string]*cloudprovider.NodeInfo{}}
	if err := p.StartLoop(context.Background(), lc); err != nil {
		t.Fatal(err)
	}
	// Nothing counts: 3 nodes of the cluster-wide limit, 4 of the quota's 8 cpu
	// at 2 cpu a node.
	if n, reasons := p.Headroom(context.Background(), lc, group{id: "grp"}, seedNode("t"), 5); n != 3 {
		t.Errorf("headroom = %d %+v, want 3 (no virtual node counted)", n, reasons)
	}
}
