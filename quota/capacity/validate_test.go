package capacity

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

func TestValidation(t *testing.T) {
	many := autoscalingv1beta1.ResourceList{}
	for i := range 21 {
		many[autoscalingv1beta1.ResourceName(fmt.Sprintf("example.com/r%02d", i))] = limits("x", "1")["x"]
	}
	long := "example.com/" + strings.Repeat("a", 52) // 64 characters
	longClass := "compute-domain-default-channel.nvidia.com"
	tests := []struct {
		name    string
		quota   *autoscalingv1beta1.CapacityQuota
		options Options
		want    string
	}{
		{name: "valid", quota: capacityQuota("q", matchLabels("pool", "a"), limits("cpu", "8", "memory", "32Gi", "nvidia.com/gpu", "2k")),
			want: "CapacityQuota is valid"},
		{name: "no selector", quota: capacityQuota("q", nil, limits("nodes", "3")), want: "CapacityQuota is valid"},
		{name: "milli cpu", quota: capacityQuota("q", nil, limits("cpu", "500m")),
			want: "limit cpu must be a non-negative integer, got 0.500"},
		{name: "milli spelling of an integer", quota: capacityQuota("q", nil, limits("cpu", "1000m")),
			want: "limit cpu must be a non-negative integer, got 1.000"},
		{name: "fractional memory", quota: capacityQuota("q", nil, limits("memory", "3.67Gi")),
			want: "limit memory must be a non-negative integer, got 3940632494.080"},
		{name: "negative", quota: capacityQuota("q", nil, limits("cpu", "-1")),
			want: "limit cpu must be a non-negative integer, got -1"},
		{name: "beyond int64", quota: capacityQuota("q", nil, limits("memory", "1e99999999")),
			want: "limit memory must be a non-negative integer, got 1e99999999"},
		{name: "too many resources", quota: capacityQuota("q", nil, many),
			want: "limits name 21 resources, at most 20 are allowed"},
		{name: "resource name too long", quota: capacityQuota("q", nil, limits(long, "1")),
			want: `limit resource name "` + long + `" must be 1 to 63 characters`},
		{name: "device class, as core ResourceQuota names it", quota: capacityQuota("q", nil, limits("gpu.example.com.deviceclass.resource.k8s.io/devices", "4")),
			want: "CapacityQuota is valid"},
		{name: "device class longer than 63 characters", quota: capacityQuota("q", nil, limits(longClass+".deviceclass.resource.k8s.io/devices", "4")),
			want: "CapacityQuota is valid"},
		{name: "device class too long for a DNS subdomain", quota: capacityQuota("q", nil, limits(strings.Repeat("a.", 113)+"b.deviceclass.resource.k8s.io/devices", "4")),
			want: `limit resource name "` + strings.Repeat("a.", 113) + `b.deviceclass.resource.k8s.io/devices": must be no more than 253 characters`},
		{name: "device class that could never exist", quota: capacityQuota("q", nil, limits("GPU_A.deviceclass.resource.k8s.io/devices", "4")),
			want: `limit resource name "GPU_A.deviceclass.resource.k8s.io/devices" names device class "GPU_A", which is not a valid DeviceClass name (a lowercase DNS subdomain)`},
		{name: "device limit must be an integer like any other", quota: capacityQuota("q", nil, limits("gpu.deviceclass.resource.k8s.io/devices", "1500m")),
			want: "limit gpu.deviceclass.resource.k8s.io/devices must be a non-negative integer, got 1.500"},
		{name: "forbidden key in matchLabels", quota: capacityQuota("q", matchLabels("node.kubernetes.io/instance-type", "n2-standard-8"), limits("cpu", "8")),
			want: `selector must not use label key "node.kubernetes.io/instance-type"`},
		{
			name: "forbidden key in matchExpressions",
			quota: capacityQuota("q", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "beta.kubernetes.io/instance-type", Operator: metav1.LabelSelectorOpExists},
			}}, limits("cpu", "8")),
			want: `selector must not use label key "beta.kubernetes.io/instance-type"`,
		},
		{
			name:    "forbidden keys are configurable",
			quota:   capacityQuota("q", matchLabels("node.kubernetes.io/instance-type", "x", "team", "a"), limits("cpu", "8")),
			options: Options{ForbiddenSelectorKeys: []string{"team"}},
			want:    `selector must not use label key "team"`,
		},
		{
			name: "unparsable selector",
			quota: capacityQuota("q", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "pool", Operator: "Near", Values: []string{"a"}},
			}}, limits("cpu", "8")),
			want: `selector is invalid: "Near" is not a valid label selector operator`,
		},
		{
			name: "every problem, sorted",
			quota: capacityQuota("q", &metav1.LabelSelector{
				MatchLabels:      map[string]string{"node.kubernetes.io/instance-type": "x", "beta.kubernetes.io/instance-type": "y"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn}},
			}, limits("memory", "1.5Gi", "cpu", "2.5")),
			want: "limit cpu must be a non-negative integer, got 2.5; " +
				"limit memory must be a non-negative integer, got 1610612736.000; " +
				"selector is invalid: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty; " +
				`selector must not use label key "beta.kubernetes.io/instance-type"; ` +
				`selector must not use label key "node.kubernetes.io/instance-type"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := Build([]*autoscalingv1beta1.CapacityQuota{tt.quota}, tt.options)
			status, ok := set.Quota("q")
			if !ok {
				t.Fatal("quota missing from the set")
			}
			if got := status.Message; got != tt.want {
				t.Errorf("message =\n%s\nwant\n%s", got, tt.want)
			}
			if status.Valid != (tt.want == autoscalingv1beta1.ValidMessage) {
				t.Errorf("Valid = %v", status.Valid)
			}
		})
	}
}

func TestScenarioQuotasAreAccepted(t *testing.T) {
	quotas := append(readQuotas(t, "testdata/more-quotas.yaml"), readQuotas(t, "testdata/quota.yaml")...)
	set := Build(quotas, Options{})
	var got []QuotaStatus
	for _, s := range set.Status() {
		got = append(got, QuotaStatus{Name: s.Name, Valid: s.Valid, Message: s.Message})
	}
	valid := func(name string) QuotaStatus {
		return QuotaStatus{Name: name, Valid: true, Message: "CapacityQuota is valid"}
	}
	want := []QuotaStatus{
		valid("capacity-quota-gpu"), valid("capacity-quota-high-perf-machines"),
		valid("capacity-quota-zone"), valid("test-capacityquota"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestDuplicateNamesAndNilEntries(t *testing.T) {
	set := Build([]*autoscalingv1beta1.CapacityQuota{
		nil,
		capacityQuota("dup", nil, limits("cpu", "4")),
		capacityQuota("dup", nil, limits("cpu", "1")),
	}, Options{})
	status := set.Status()
	if len(status) != 2 || !status[0].Valid || status[1].Valid ||
		status[1].Message != "another CapacityQuota with this name comes first" {
		t.Errorf("status = %+v", status)
	}
	first, _ := set.Quota("dup")
	if !first.Valid {
		t.Error("Quota(dup) is not the first, valid one")
	}
	if _, ok := set.Quota("absent"); ok {
		t.Error("Quota(absent) found")
	}
}
