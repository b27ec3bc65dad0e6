package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

func TestCapacityReport(t *testing.T) {
	quota := seedQuota(t)
	quota.Status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: autoscalingv1beta1.ResourceList{"cpu": list("cpu", "6")["cpu"]}}
	nodesQuota := &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: "a-zone"},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"topology.kubernetes.io/zone": "us-central1-f"}},
			Limits:   autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{"nodes": list("n", "10")["n"], "memory": list("m", "64Gi")["m"]}},
		}}
	invalid := &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: "z-instance-type"},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"node.kubernetes.io/instance-type": "n2-standard-2"}},
			Limits:   autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{"cpu": list("cpu", "1")["cpu"]}},
		}}
	s := Snapshot{Now: now, Nodes: seedNodes(2), NodesListed: true, Quotas: quotasOf(quota, invalid, nodesQuota),
		Autoscaler: autoscalerWith(
			NodeGroupStatus{Name: seedGroup, MaxSize: 20, Target: 3, Registered: 1}, // one more registered since
			NodeGroupStatus{Name: "empty-group", MaxSize: 5, Target: 2},
		)}
	r := Capacity(s)
	want := CapacityReport{Kind: "CapacityReport", APIVersion: APIVersion, Quotas: []CapacityQuotaView{{
		Name: "a-zone", Selector: "topology.kubernetes.io/zone=us-central1-f", Valid: true, Message: "CapacityQuota is valid",
		UsedFrom: FromNodes, NodeGroups: []string{seedGroup},
		Resources: []QuotaResource{
			{Resource: "memory", Used: "16Gi", Upcoming: "8Gi", Limit: "64Gi", Headroom: "40Gi"},
			{Resource: "nodes", Used: "2", Upcoming: "1", Limit: "10", Headroom: "7"},
		},
	}, {
		Name: "test-capacityquota", Selector: "cloud.google.com/compute-class=test-capacityquota-class", Valid: true,
		Message: "CapacityQuota is valid", UsedFrom: FromNodes, NodeGroups: []string{seedGroup},
		Resources: []QuotaResource{{Resource: "cpu", Used: "4", Upcoming: "2", Limit: "8", Headroom: "2"}},
	}, {
		Name: "z-instance-type", Selector: "node.kubernetes.io/instance-type=n2-standard-2",
		Message:   `selector must not use label key "node.kubernetes.io/instance-type"`,
		UsedFrom:  FromStatus,
		Resources: []QuotaResource{{Resource: "cpu", Used: "0", Limit: "1", Headroom: "1"}},
	}}, Notes: []string{"node group(s) empty-group have upcoming nodes but no registered node to read labels and capacity from: their upcoming nodes are not counted"}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("capacity report (-want +got):\n%s", diff)
	}

	s.NodesListed, s.Nodes, s.Autoscaler = false, nil, nil
	r = Capacity(s)
	if got, want := r.Quotas[1].Resources, []QuotaResource{{Resource: "cpu", Used: "6", Limit: "8", Headroom: "2"}}; !cmp.Equal(got, want) || r.Quotas[1].UsedFrom != FromStatus {
		t.Errorf("without nodes: %+v from %s, want %+v from status", got, r.Quotas[1].UsedFrom, want)
	}
	if want := []string{
		"upcoming nodes are unknown without the autoscaler's status",
		"nodes could not be listed: used is status.used, as the autoscaler last wrote it",
	}; !cmp.Equal(want, r.Notes) {
		t.Errorf("notes (-want +got):\n%s", cmp.Diff(want, r.Notes))
	}
}

func TestInGroup(t *testing.T) {
	node := func(labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: annotations}}
	}
	capi := func(kind, name, namespace string) *corev1.Node {
		return node(nil, map[string]string{capiOwnerKind: kind, capiOwnerName: name, capiNamespace: namespace})
	}
	tests := []struct {
		name  string
		node  *corev1.Node
		group string
		want  bool
	}{
		{"kwok label", node(map[string]string{"quotascale.io/node-group": "n2"}, nil), "n2", true},
		{"kwok label, other group", node(map[string]string{"quotascale.io/node-group": "n2"}, nil), "n2-big", false},
		{"GKE node pool", node(map[string]string{"cloud.google.com/gke-nodepool": "pool-1"}, nil), "pool-1", true},
		{"Cluster API MachineDeployment, through its MachineSet", capi("MachineSet", "md-a-7f9c8", "ns"), "MachineDeployment/ns/md-a", true},
		{"Cluster API MachineDeployment, other namespace", capi("MachineSet", "md-a-7f9c8", "other"), "MachineDeployment/ns/md-a", false},
		{"Cluster API MachineDeployment, by label", node(map[string]string{"cluster.x-k8s.io/deployment-name": "md-a"}, nil), "MachineDeployment/ns/md-a", true},
		{"Cluster API MachineSet", capi("MachineSet", "ms-b", "ns"), "MachineSet/ns/ms-b", true},
		{"Cluster API MachineSet, a prefix is not enough", capi("MachineSet", "ms-b-2", "ns"), "MachineSet/ns/ms-b", false},
		{"no marks", node(nil, nil), "n2", false},
	}
	for _, tt := range tests {
		if got := inGroup(tt.node, tt.group); got != tt.want {
			t.Errorf("%s: inGroup = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNodeGroupsTemplateAndUpcoming(t *testing.T) {
	nodes := seedNodes(3)
	nodes[0].Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}, {Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	nodes[0].Spec.Unschedulable = true
	groups := nodeGroups(autoscalerWith(NodeGroupStatus{Name: seedGroup, Target: 5, Registered: 2}), nodes)
	if len(groups) != 1 {
		t.Fatalf("%d groups", len(groups))
	}
	g := groups[0]
	if g.registered != 3 || g.upcoming != 2 {
		t.Errorf("registered %d upcoming %d, want 3 and 2 (recounted from the nodes listed now)", g.registered, g.upcoming)
	}
	if g.template.Name != nodes[0].Name || g.template.Spec.Unschedulable {
		t.Errorf("template %s unschedulable %v, want the oldest node, schedulable", g.template.Name, g.template.Spec.Unschedulable)
	}
	if diff := cmp.Diff([]corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}}, g.template.Spec.Taints); diff != "" {
		t.Errorf("template taints (-want +got):\n%s", diff)
	}
	if len(nodes[0].Spec.Taints) != 2 {
		t.Error("the node itself was modified")
	}
	if groups := nodeGroups(nil, nodes); groups != nil {
		t.Errorf("groups without an autoscaler status: %v", groups)
	}
}

// TestCapacityReportDevices: device counts come from status.used, which the
// autoscaler computes from ResourceSlices, and a limit on a class that does
// not exist is reported as matching no device.
func TestCapacityReportDevices(t *testing.T) {
	const gpus, absent = "gpu.example.com.deviceclass.resource.k8s.io/devices", "absent.example.com.deviceclass.resource.k8s.io/devices"
	q := &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{Limits: autoscalingv1beta1.CapacityQuotaLimits{Resources: autoscalingv1beta1.ResourceList{
			gpus: list("x", "4")["x"], absent: list("x", "2")["x"], "nodes": list("x", "10")["x"],
		}}}}
	q.Status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: autoscalingv1beta1.ResourceList{gpus: list("x", "3")["x"], absent: list("x", "0")["x"], "nodes": list("x", "7")["x"]}}
	message := absent + ` matches no device: no DeviceClass "absent.example.com"`
	q.Status.Conditions = []metav1.Condition{{Type: autoscalingv1beta1.DeviceClassesCondition, Status: metav1.ConditionFalse, Reason: autoscalingv1beta1.DeviceClassNotFoundReason, Message: message}}
	r := Capacity(Snapshot{Now: now, Nodes: seedNodes(2), NodesListed: true, Quotas: quotasOf(q)})
	want := []QuotaResource{
		{Resource: absent, Used: "0", Limit: "2", Headroom: "2"},
		{Resource: gpus, Used: "3", Limit: "4", Headroom: "1"},
		{Resource: "nodes", Used: "2", Limit: "10", Headroom: "8"},
	}
	if diff := cmp.Diff(want, r.Quotas[0].Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	wantNotes := []string{
		"upcoming nodes are unknown without the autoscaler's status",
		"CapacityQuota gpus: device counts are status.used, as the autoscaler last wrote it (kubectl-quota does not evaluate DeviceClass selectors); upcoming devices are unknown",
		"CapacityQuota gpus: " + message,
	}
	if diff := cmp.Diff(wantNotes, r.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}
