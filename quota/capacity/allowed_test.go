package capacity

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

var testClass = map[string]string{
	"cloud.google.com/compute-class":  "test-capacityquota-class",
	"cloud.google.com/machine-family": "n2",
}

func withHostname(labels map[string]string, host string) map[string]string {
	out := map[string]string{"kubernetes.io/hostname": host}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// TestScenarioAutoscalerStopsAtTheLimit follows
// shared/scenarios/capacity-quota/EXPECTED.md: 2-cpu nodes against an 8-cpu
// quota, with nodes sitting as upcoming before they register.
func TestScenarioAutoscalerStopsAtTheLimit(t *testing.T) {
	set := Build(readQuotas(t, "testdata/quota.yaml"), Options{})
	template := node("template", withHostname(testClass, "template-1"), coreList("cpu", "2", "memory", "8Gi", "pods", "110"))
	template.Status.Allocatable = coreList("cpu", "1930m", "memory", "7Gi")

	k, exceeded := set.AllowedDelta(template, 6)
	if k != 4 {
		t.Fatalf("first scale-up allowed %d nodes, want 4", k)
	}
	wantReason := `exceeded quota: "CapacityQuota/test-capacityquota", resources: cpu`
	if len(exceeded) != 1 || exceeded[0].Reason() != wantReason {
		t.Fatalf("exceeded = %+v, want one with reason %s", exceeded, wantReason)
	}

	set.SetUpcoming("test-grp", 4, template)
	if k, _ := set.AllowedDelta(template, 2); k != 0 {
		t.Errorf("with 4 nodes provisioning, allowed %d more, want 0", k)
	}
	status, _ := set.Quota("test-capacityquota")
	if diff := cmp.Diff(coreList("cpu", "0"), status.Used, quantityEqual); diff != "" {
		t.Errorf("status.used before registration (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(coreList("cpu", "8"), status.Upcoming, quantityEqual); diff != "" {
		t.Errorf("upcoming (-want +got):\n%s", diff)
	}

	for i := range 4 {
		registered := node(fmt.Sprint("n", i), withHostname(testClass, fmt.Sprint("n", i)), coreList("cpu", "2", "memory", "8Gi"))
		registered.Status.Allocatable = coreList("cpu", "1930m")
		set.AddNode(registered)
		set.SetUpcoming("test-grp", 3-i, template)
	}
	status, _ = set.Quota("test-capacityquota")
	if diff := cmp.Diff(coreList("cpu", "8"), status.Used, quantityEqual); diff != "" {
		t.Errorf("status.used once registered (-want +got):\n%s", diff)
	}
	if k, exceeded := set.AllowedDelta(template, 1); k != 0 || len(exceeded) != 1 || exceeded[0].Reason() != wantReason {
		t.Errorf("after registration: k=%d exceeded=%+v", k, exceeded)
	}
	if got := len(set.sets); got != 1 {
		t.Errorf("%d cached label sets, want 1: hostnames must not split a node group", got)
	}

	// Lowering the limit removes nothing and only blocks new nodes.
	lowered := readQuotas(t, "testdata/quota.yaml")
	lowered[0].Spec.Limits.Resources = limits("cpu", "4")
	set = set.Rebuild(lowered, Options{})
	status, _ = set.Quota("test-capacityquota")
	if diff := cmp.Diff(coreList("cpu", "8"), status.Used, quantityEqual); diff != "" {
		t.Errorf("status.used after lowering the limit (-want +got):\n%s", diff)
	}
	if k, _ := set.AllowedDelta(template, 1); k != 0 {
		t.Errorf("allowed %d over a lowered limit", k)
	}
}

func TestUsageCountsCapacityPerResource(t *testing.T) {
	gpuLabels := map[string]string{"accelerator": "t4", "zone": "b"}
	set := Build([]*autoscalingv1beta1.CapacityQuota{
		capacityQuota("gpus", matchLabels("accelerator", "t4"), limits("nvidia.com/gpu", "16", "nodes", "10")),
		capacityQuota("zone-b", matchLabels("zone", "b"), limits("cpu", "100", "memory", "1Ti")),
		capacityQuota(ClusterWideName, nil, limits("cpu", "1000", "nodes", "3")),
	}, Options{})
	set.AddNode(node("gpu-1", gpuLabels, coreList("cpu", "7500m", "memory", "30Gi", "nvidia.com/gpu", "4")))
	set.AddNode(node("gpu-2", gpuLabels, coreList("cpu", "7500m", "memory", "30Gi", "nvidia.com/gpu", "4")))
	set.AddNode(node("plain", map[string]string{"zone": "c"}, coreList("cpu", "4", "memory", "16Gi")))

	want := map[string]corev1.ResourceList{
		"gpus":          coreList("nvidia.com/gpu", "8", "nodes", "2"),
		"zone-b":        coreList("cpu", "16", "memory", "60Gi"), // 7500m counts as 8 cores
		ClusterWideName: coreList("cpu", "20", "nodes", "3"),
	}
	for name, used := range want {
		status, _ := set.Quota(name)
		if diff := cmp.Diff(used, status.Used, quantityEqual); diff != "" {
			t.Errorf("used of %s (-want +got):\n%s", name, diff)
		}
	}

	// Moving gpu-2 out of zone b by a label change.
	set.UpdateNode(node("gpu-2", map[string]string{"accelerator": "t4", "zone": "c"}, coreList("cpu", "7500m", "memory", "30Gi", "nvidia.com/gpu", "4")))
	status, _ := set.Quota("zone-b")
	if diff := cmp.Diff(coreList("cpu", "8", "memory", "30Gi"), status.Used, quantityEqual); diff != "" {
		t.Errorf("zone-b after relabel (-want +got):\n%s", diff)
	}
	if !set.RemoveNode("gpu-1") || set.RemoveNode("gpu-1") {
		t.Error("RemoveNode is not idempotent")
	}
	status, _ = set.Quota("gpus")
	if diff := cmp.Diff(coreList("nvidia.com/gpu", "4", "nodes", "1"), status.Used, quantityEqual); diff != "" {
		t.Errorf("gpus after removal (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ClusterWideName, "gpus", "zone-b"}, set.MatchingQuotas(node("x", gpuLabels, nil))); diff != "" {
		t.Errorf("MatchingQuotas (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ClusterWideName}, set.MatchingQuotas(nil)); diff != "" {
		t.Errorf("MatchingQuotas(nil) (-want +got):\n%s", diff)
	}
}

func TestAllowedDelta(t *testing.T) {
	set := Build([]*autoscalingv1beta1.CapacityQuota{
		capacityQuota("b-memory", matchLabels("pool", "a"), limits("memory", "64Gi", "cpu", "24")),
		capacityQuota("a-cpu", matchLabels("pool", "a"), limits("cpu", "20")),
		capacityQuota("gpu", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "pool", Operator: metav1.LabelSelectorOpExists},
		}}, limits("nvidia.com/gpu", "3")),
		capacityQuota("invalid", matchLabels("pool", "a"), limits("cpu", "1500m")),
		capacityQuota("other-pool", matchLabels("pool", "b"), limits("cpu", "0")),
	}, Options{})
	set.AddNode(node("existing", map[string]string{"pool": "a"}, coreList("cpu", "4", "memory", "16Gi")))
	template := node("t", map[string]string{"pool": "a"}, coreList("cpu", "4", "memory", "16Gi"))
	tests := []struct {
		name     string
		template *corev1.Node
		wanted   int
		want     int
		reasons  []string
	}{
		{name: "nothing binds", template: template, wanted: 2, want: 2},
		{name: "nothing wanted", template: template, wanted: 0, want: 0},
		{
			// a-cpu: (20-4)/4 = 4; b-memory: memory (64-16)/16 = 3, cpu (24-4)/4 = 5.
			// Only what stops the 4th node is named: b-memory's memory.
			name: "the tightest quota decides and only it is named", template: template, wanted: 10, want: 3,
			reasons: []string{
				`exceeded quota: "CapacityQuota/b-memory", resources: memory`,
			},
		},
		{
			// a-cpu allows all 4 wanted; b-memory allows 3 and alone binds.
			name: "a quota that would stop a later node is not named", template: template, wanted: 4, want: 3,
			reasons: []string{
				`exceeded quota: "CapacityQuota/b-memory", resources: memory`,
			},
		},
		{
			name: "a resource the template lacks does not constrain", wanted: 4, want: 4,
			template: node("t", map[string]string{"pool": "a"}, coreList("cpu", "1")),
		},
		{
			name: "extended resources are enforced", wanted: 5, want: 1,
			template: node("t", map[string]string{"pool": "c"}, coreList("nvidia.com/gpu", "2")),
			reasons:  []string{`exceeded quota: "CapacityQuota/gpu", resources: nvidia.com/gpu`},
		},
		{name: "no matching quota", template: node("t", map[string]string{"pool": "z"}, coreList("cpu", "64")), wanted: 7, want: 7},
		{name: "nil template", wanted: 7, want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, exceeded := set.AllowedDelta(tt.template, tt.wanted)
			if k != tt.want {
				t.Errorf("k = %d, want %d", k, tt.want)
			}
			var reasons []string
			for _, e := range exceeded {
				reasons = append(reasons, e.Reason())
			}
			if diff := cmp.Diff(tt.reasons, reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowedDeltaDoesNotAllocateWhenNothingBinds(t *testing.T) {
	set := Build([]*autoscalingv1beta1.CapacityQuota{
		capacityQuota("pool", matchLabels("pool", "a"), limits("cpu", "1000", "memory", "1Ti", "nodes", "100")),
	}, Options{})
	template := node("t", map[string]string{"pool": "a", "kubernetes.io/hostname": "t"}, coreList("cpu", "4", "memory", "16Gi"))
	set.AllowedDelta(template, 1) // caches the label set
	if allocs := testing.AllocsPerRun(100, func() {
		if k, _ := set.AllowedDelta(template, 5); k != 5 {
			t.Fatalf("k = %d", k)
		}
	}); allocs != 0 {
		t.Errorf("AllowedDelta allocates %v times, want 0", allocs)
	}
}

func TestUpcomingGroupsAndRebuild(t *testing.T) {
	quotas := []*autoscalingv1beta1.CapacityQuota{capacityQuota("nodes", nil, limits("nodes", "10"))}
	set := Build(quotas, Options{})
	template := node("t", nil, coreList("cpu", "1"))
	set.SetUpcoming("g1", 3, template)
	set.SetUpcoming("g2", 2, template)
	set.SetUpcoming("g2", 4, template) // replaces, does not add
	set.AddNode(node("n1", nil, nil))
	if k, _ := set.AllowedDelta(template, 10); k != 2 {
		t.Errorf("k = %d, want 2 (10 - 3 - 4 - 1)", k)
	}
	rebuilt := set.Rebuild(quotas, Options{})
	if k, _ := rebuilt.AllowedDelta(template, 10); k != 2 {
		t.Errorf("after Rebuild k = %d, want 2", k)
	}
	set.SetUpcoming("g1", 0, template)
	set.SetUpcoming("g2", 1, nil)
	if k, _ := set.AllowedDelta(template, 10); k != 9 {
		t.Errorf("after clearing groups k = %d, want 9", k)
	}
	set.AddNode(nil)
	status, _ := set.Quota("nodes")
	if diff := cmp.Diff(coreList("nodes", "1"), status.Used, quantityEqual); diff != "" {
		t.Errorf("used (-want +got):\n%s", diff)
	}
}

func TestClusterWideAndConversions(t *testing.T) {
	q := ClusterWide(limits("cpu", "100"))
	if q.Name != ClusterWideName || q.Spec.Selector != nil {
		t.Errorf("ClusterWide = %+v", q)
	}
	round := FromCoreList(ToCoreList(limits("cpu", "2", "nodes", "3")))
	if diff := cmp.Diff(limits("cpu", "2", "nodes", "3"), round, quantityEqual); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	invalid := Build([]*autoscalingv1beta1.CapacityQuota{capacityQuota("bad", nil, limits("cpu", "-1"))}, Options{})
	if s := invalid.Status()[0]; s.Valid || s.Used != nil {
		t.Errorf("invalid quota status = %+v", s)
	}
}
