package report

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

const seedRefusal = `CapacityQuota "test-capacityquota" on cpu (used 8 + upcoming 0 + 2 per node > limit 8)`

// TestExplainSeedCapacityQuota: seed 001 once the four nodes registered: the
// group can host the pod, and the quota stops its fifth node.
func TestExplainSeedCapacityQuota(t *testing.T) {
	pod := seedWorkloadPod()
	s := Snapshot{Now: now, Nodes: seedNodes(4), NodesListed: true, Quotas: quotasOf(seedQuota(t)),
		Autoscaler: autoscalerWith(NodeGroupStatus{Name: seedGroup, MaxSize: 20, Target: 4, Registered: 4})}
	e := Explain(s, pod, DefaultTop)
	if want := "Pending: no node group may grow: " + seedRefusal; e.Verdict != want {
		t.Errorf("verdict\n got %s\nwant %s", e.Verdict, want)
	}
	statusTime := now.Add(-5 * time.Second)
	want := &CapacityExplanation{
		AutoscalerStatus: "ConfigMap kube-system/cluster-autoscaler-status",
		StatusTime:       &statusTime,
		NodeGroups: []NodeGroupFit{{
			Name: seedGroup, MaxSize: 20, Target: 4, Registered: 4, Template: "n2-standard-2-node0",
			CanHost: true, Blocked: []string{seedRefusal}, Quotas: []string{"test-capacityquota"},
		}},
		Quotas: []CapacityQuotaView{{
			Name: "test-capacityquota", Selector: "cloud.google.com/compute-class=test-capacityquota-class",
			Valid: true, Message: "CapacityQuota is valid", UsedFrom: FromNodes, NodeGroups: []string{seedGroup},
			Resources: []QuotaResource{{Resource: "cpu", Used: "8", Upcoming: "0", Limit: "8", Headroom: "0"}},
		}},
	}
	if diff := cmp.Diff(want, e.Capacity); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
}

func TestExplainCapacityCases(t *testing.T) {
	quota := seedQuota(t)
	group := func(target, registered, maxSize int) NodeGroupStatus {
		return NodeGroupStatus{Name: seedGroup, MaxSize: maxSize, Target: target, Registered: registered}
	}
	tainted := seedNodes(2)
	for _, n := range tainted {
		n.Spec.Taints = []corev1.Taint{
			{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute}, // a node's life, not its group's
		}
	}
	withPod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := seedWorkloadPod()
		edit(p)
		return p
	}
	tolerating := withPod(func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	})
	failed := withPod(func(*corev1.Pod) {})
	lastEvent := eventsOf(
		event(failed, "FailedScheduling", "default-scheduler", "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.", 2*time.Minute),
		event(failed, "NotTriggerScaleUp", "cluster-autoscaler", `pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`, time.Minute),
	)
	statusUsed := quota.DeepCopy()
	statusUsed.Status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: autoscalingv1beta1.ResourceList{"cpu": list("cpu", "8")["cpu"]}}

	tests := []struct {
		name        string
		pod         *corev1.Pod
		nodes       []*corev1.Node
		quotas      []*autoscalingv1beta1.CapacityQuota
		autoscaler  *AutoscalerStatus
		events      []*corev1.Event
		wantVerdict string
		wantWhy     string
		wantQuotas  []string
		wantNote    string
	}{{
		name:        "nodes still provisioning: the pod waits for them",
		pod:         seedWorkloadPod(),
		nodes:       seedNodes(2),
		quotas:      quotasOf(quota),
		autoscaler:  autoscalerWith(group(4, 2, 20)),
		wantVerdict: `Pending: waiting for 2 upcoming node(s) of node group "n2-standard-2"`,
		wantWhy:     `CapacityQuota "test-capacityquota" on cpu (used 4 + upcoming 4 + 2 per node > limit 8)`,
		wantQuotas:  []string{"test-capacityquota"},
	}, {
		name:        "room under the quota: the group may grow",
		pod:         seedWorkloadPod(),
		nodes:       seedNodes(2),
		quotas:      quotasOf(quota),
		autoscaler:  autoscalerWith(group(2, 2, 20)),
		wantVerdict: `Pending: node group "n2-standard-2" can host it and may grow; waiting for the autoscaler`,
		wantQuotas:  []string{"test-capacityquota"},
	}, {
		name:        "a group at its max size",
		pod:         seedWorkloadPod(),
		nodes:       seedNodes(2),
		autoscaler:  autoscalerWith(group(2, 2, 2)),
		wantVerdict: `Pending: no node group may grow: node group "n2-standard-2" is at its max size 2`,
		wantWhy:     `node group "n2-standard-2" is at its max size 2`,
	}, {
		name:  "a group in backoff",
		pod:   seedWorkloadPod(),
		nodes: seedNodes(2),
		autoscaler: autoscalerWith(NodeGroupStatus{Name: seedGroup, MaxSize: 20, Target: 2, Registered: 2,
			Backoff: "ZONE_RESOURCE_POOL_EXHAUSTED: no capacity left in the zone"}),
		wantVerdict: `Pending: no node group may grow: node group "n2-standard-2" is in backoff: ZONE_RESOURCE_POOL_EXHAUSTED: no capacity left in the zone`,
	}, {
		name:        "a node selector no group satisfies",
		pod:         withPod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "gpu"} }),
		nodes:       seedNodes(2),
		autoscaler:  autoscalerWith(group(2, 2, 20)),
		wantVerdict: "Pending: no node group can host it (n2-standard-2: node selector or required node affinity does not match its labels)",
	}, {
		name:        "a taint the pod does not tolerate",
		pod:         seedWorkloadPod(),
		nodes:       tainted,
		autoscaler:  autoscalerWith(group(2, 2, 20)),
		wantVerdict: `Pending: no node group can host it (n2-standard-2: taint dedicated=batch:NoSchedule is not tolerated)`,
	}, {
		name:        "tolerated: transient taints of the template are ignored",
		pod:         tolerating,
		nodes:       tainted,
		autoscaler:  autoscalerWith(group(2, 2, 20)),
		wantVerdict: `Pending: node group "n2-standard-2" can host it and may grow; waiting for the autoscaler`,
	}, {
		name:        "bigger than a node",
		pod:         withPod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = list("cpu", "3") }),
		nodes:       seedNodes(2),
		autoscaler:  autoscalerWith(group(2, 2, 20)),
		wantVerdict: "Pending: no node group can host it (n2-standard-2: requests more than a node allocates: cpu 3 > 1930m)",
	}, {
		name:        "no registered node to use as template: quotas by the pod's nodeSelector",
		pod:         failed,
		quotas:      quotasOf(statusUsed),
		autoscaler:  autoscalerWith(group(4, 0, 20)),
		events:      lastEvent,
		wantVerdict: `Pending: pod didn't trigger scale-up: 1 exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`,
		wantWhy:     "no registered node of the group to read its labels, taints and capacity from",
		wantQuotas:  []string{"test-capacityquota"},
		wantNote:    "no node group able to host the pod is known",
	}, {
		name:        "no autoscaler status: the scheduler's words",
		pod:         failed,
		quotas:      quotasOf(statusUsed),
		events:      lastEvent[:1],
		wantVerdict: "Pending: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
		wantQuotas:  []string{"test-capacityquota"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot{Now: now, Nodes: tt.nodes, NodesListed: true, Quotas: tt.quotas, Autoscaler: tt.autoscaler, Events: tt.events}
			e := Explain(s, tt.pod, DefaultTop)
			if e.Verdict != tt.wantVerdict {
				t.Errorf("verdict\n got %s\nwant %s", e.Verdict, tt.wantVerdict)
			}
			if e.Capacity == nil {
				t.Fatal("no capacity explanation for a pending pod")
			}
			if tt.wantWhy != "" {
				g := e.Capacity.NodeGroups[0]
				if why := strings.Join(append([]string{g.Why}, g.Blocked...), "|"); !strings.Contains(why, tt.wantWhy) {
					t.Errorf("group why/blocked %q, want %q", why, tt.wantWhy)
				}
			}
			var quotas []string
			for _, q := range e.Capacity.Quotas {
				quotas = append(quotas, q.Name)
			}
			if diff := cmp.Diff(tt.wantQuotas, quotas); diff != "" {
				t.Errorf("quotas (-want +got):\n%s", diff)
			}
			if tt.wantNote != "" && !slices.ContainsFunc(e.Notes, func(n string) bool { return strings.Contains(n, tt.wantNote) }) {
				t.Errorf("no note containing %q in %q", tt.wantNote, e.Notes)
			}
		})
	}
}

// TestExplainFallbackFigures: without a template, a quota listed by the pod's
// nodeSelector shows status.used and no upcoming figure.
func TestExplainFallbackFigures(t *testing.T) {
	q := seedQuota(t)
	q.Status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: autoscalingv1beta1.ResourceList{"cpu": list("cpu", "6")["cpu"]}}
	allNodes := seedQuota(t)
	allNodes.Name, allNodes.Spec.Selector = "all-nodes", nil
	// Matches the pod's nodeSelector, but a node in us-central1-b would not be
	// counted: not certain, so not listed.
	negative := seedQuota(t)
	negative.Name = "not-zone-b"
	negative.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{
		{Key: "topology.kubernetes.io/zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"us-central1-b"}}}
	e := Explain(Snapshot{Now: now, Quotas: quotasOf(q, allNodes, negative)}, seedWorkloadPod(), DefaultTop)
	want := []CapacityQuotaView{{
		Name: "all-nodes", Selector: "<all nodes>", Valid: true, Message: "CapacityQuota is valid", UsedFrom: FromStatus,
		Resources: []QuotaResource{{Resource: "cpu", Used: "0", Limit: "8", Headroom: "8"}},
	}, {
		Name: "test-capacityquota", Selector: "cloud.google.com/compute-class=test-capacityquota-class",
		Valid: true, Message: "CapacityQuota is valid", UsedFrom: FromStatus,
		Resources: []QuotaResource{{Resource: "cpu", Used: "6", Limit: "8", Headroom: "2"}},
	}}
	if diff := cmp.Diff(want, e.Capacity.Quotas); diff != "" {
		t.Errorf("quotas by selector (-want +got):\n%s", diff)
	}
}

// TestExplainStaleAutoscalerStatus: a status that counts nodes which are gone,
// written long ago, is reported as such rather than trusted.
func TestExplainStaleAutoscalerStatus(t *testing.T) {
	status := autoscalerWith(NodeGroupStatus{Name: seedGroup, MaxSize: 20, Target: 4, Registered: 4})
	status.Time = now.Add(-time.Hour)
	e := Explain(Snapshot{Now: now, NodesListed: true, Autoscaler: status}, seedWorkloadPod(), DefaultTop)
	if why := e.Capacity.NodeGroups[0].Why; !strings.HasPrefix(why, "none of the 4 nodes the autoscaler counts was found") {
		t.Errorf("why %q", why)
	}
	want := "the autoscaler status was written 60m ago: is the autoscaler running? Its node groups may be out of date"
	if !slices.Contains(e.Notes, want) {
		t.Errorf("notes %q lack %q", e.Notes, want)
	}
	if r := Capacity(Snapshot{Now: now, NodesListed: true, Autoscaler: status}); !slices.Contains(r.Notes, want) {
		t.Errorf("capacity notes %q lack %q", r.Notes, want)
	}
}
