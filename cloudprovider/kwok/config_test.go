package kwok

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const validConfig = `
nodeGroups:
- name: small
  minSize: 0
  maxSize: 10
  labels:
    cloud.google.com/machine-family: n2
  taints:
  - key: dedicated
    value: batch
    effect: NoSchedule
  capacity:
    cpu: "2"
    memory: 8Gi
  allocatable:
    cpu: 1930m
  provisioningDelay: 2s
- name: gpu
  minSize: 1
  maxSize: 3
  capacity: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "1", pods: "50"}
  failures: {outOfResources: true, failAfter: 1}
`

func TestParseConfigCompiles(t *testing.T) {
	cfg, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.compile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu", "small"}, c.names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	small := c.groups["small"]
	wantCapacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	wantAllocatable := wantCapacity.DeepCopy()
	wantAllocatable[corev1.ResourceCPU] = resource.MustParse("1930m")
	if diff := cmp.Diff(wantCapacity, small.capacity); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantAllocatable, small.allocatable); diff != "" {
		t.Errorf("allocatable (-want +got):\n%s", diff)
	}
	if small.delay != 2*time.Second || small.failures != nil {
		t.Errorf("small: delay %v failures %+v", small.delay, small.failures)
	}
	gpu := c.groups["gpu"]
	wantFailures := &failureSpec{class: "OutOfResources", code: ErrorCodeOutOfResources, message: "kwok cloud: out of resources for node group gpu", failAfter: 1}
	if diff := cmp.Diff(wantFailures, gpu.failures, cmp.AllowUnexported(failureSpec{})); diff != "" {
		t.Errorf("gpu failures (-want +got):\n%s", diff)
	}
	if got := gpu.capacity[corev1.ResourcePods]; got.String() != "50" {
		t.Errorf("gpu pods = %s, want 50", got.String())
	}
}

// TestConfigErrors pins the exact messages of bad configs: people read them, and
// tests elsewhere assert on them.
func TestConfigErrors(t *testing.T) {
	const shape = "capacity: {cpu: \"1\", memory: 1Gi}"
	for _, tc := range []struct {
		name, config, want string
	}{
		{"empty", ``, "invalid kwok cloud config: nodeGroups: at least one node group is required"},
		{"unknown field", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", size: 3}]",
			`parsing kwok cloud config: error unmarshaling JSON: while decoding JSON: json: unknown field "size"`},
		{"not yaml", "nodeGroups: [", "parsing kwok cloud config: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{"missing name", "nodeGroups: [{maxSize: 1, " + shape + "}]", "invalid kwok cloud config: nodeGroups[0]: name is required"},
		{"bad name", "nodeGroups: [{name: Small_1, maxSize: 1, " + shape + "}]",
			`invalid kwok cloud config: nodeGroups[0]: name "Small_1" must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`},
		{"long name", "nodeGroups: [{name: " + strings.Repeat("a", 55) + ", maxSize: 1, " + shape + "}]",
			`invalid kwok cloud config: nodeGroups[0]: name "` + strings.Repeat("a", 55) + `" is longer than 54 characters`},
		{"duplicate name", "nodeGroups: [{name: a, maxSize: 1, " + shape + "}, {name: a, maxSize: 1, " + shape + "}]",
			`invalid kwok cloud config: nodeGroups[1] (a): name "a" is also used by nodeGroups[0]`},
		{"min above max", "nodeGroups: [{name: a, minSize: 3, maxSize: 2, " + shape + "}]",
			"invalid kwok cloud config: nodeGroups[0] (a): maxSize 2 is less than minSize 3"},
		{"negative min", "nodeGroups: [{name: a, minSize: -1, maxSize: 2, " + shape + "}]",
			"invalid kwok cloud config: nodeGroups[0] (a): minSize -1 is negative"},
		{"too many instances", "nodeGroups: [{name: a, maxSize: 3000, " + shape + "}, {name: b, maxSize: 1001, " + shape + "}]",
			"invalid kwok cloud config: nodeGroups: maxSize adds up to 4001 over all node groups, more than the 4000 instances the state ConfigMap can hold"},
		{"no capacity", "nodeGroups: [{name: a, maxSize: 1}]",
			"invalid kwok cloud config: nodeGroups[0] (a): capacity.cpu is required; nodeGroups[0] (a): capacity.memory is required"},
		{"bad quantity", "nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: two, memory: 1Gi}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): capacity.cpu: "two" is not a quantity`},
		{"negative quantity", "nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: \"-1\", memory: 1Gi}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): capacity.cpu: "-1" is negative`},
		{"bad resource name", "nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: \"1\", memory: 1Gi, \"a b\": \"1\"}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): capacity: "a b" is not a valid resource name`},
		{"allocatable above capacity", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", allocatable: {memory: 2Gi}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): allocatable.memory: 2Gi is more than capacity.memory 1Gi"},
		{"allocatable without capacity", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", allocatable: {nvidia.com/gpu: \"1\"}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): allocatable.nvidia.com/gpu: the resource is not in capacity"},
		{"bad label key", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", labels: {\"a b\": x}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): labels: "a b" is not a valid label key`},
		{"bad label value", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", labels: {zone: \"a b\"}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): labels[zone]: "a b" is not a valid label value`},
		{"reserved label", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", labels: {quotascale.io/node-group: b}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): labels: quotascale.io/node-group is set by the cloud and cannot be configured"},
		{"bad taint", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", taints: [{key: \"\", value: \"a b\", effect: Sometimes}]}]",
			`invalid kwok cloud config: nodeGroups[0] (a): taints[0].key: "" is not a valid taint key; nodeGroups[0] (a): taints[0].value: "a b" is not a valid taint value; nodeGroups[0] (a): taints[0].effect: "Sometimes" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{"bad delay", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", provisioningDelay: soon}]",
			`invalid kwok cloud config: nodeGroups[0] (a): provisioningDelay: "soon" is not a duration such as "2s" or "1m30s"`},
		{"negative delay", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", provisioningDelay: -1s}]",
			`invalid kwok cloud config: nodeGroups[0] (a): provisioningDelay: "-1s" is negative`},
		{"failAfter without failure", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", failures: {failAfter: 2}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): failures.failAfter is set but instances never fail: set failures.outOfResources or failures.errorCode"},
		{"message without failure", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", failures: {message: boom}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): failures.message is set but instances never fail: set failures.outOfResources or failures.errorCode"},
		{"negative failAfter", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", failures: {outOfResources: true, failAfter: -2}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): failures.failAfter -2 is negative"},
		{"bad error code", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", failures: {errorCode: \"no way\"}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): failures.errorCode: "no way" must be 1 to 63 letters, digits, '_', '-' or '.'`},
		{"problems of two groups in order", "nodeGroups: [{name: b, minSize: 2, maxSize: 1, " + shape + "}, {name: a, maxSize: 1}]",
			"invalid kwok cloud config: nodeGroups[0] (b): maxSize 1 is less than minSize 2; nodeGroups[1] (a): capacity.cpu is required; nodeGroups[1] (a): capacity.memory is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.config))
			if err == nil {
				t.Fatalf("want error %q, got none", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestSources(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, []byte(validConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kwok-config"},
		Data:       map[string]string{DefaultConfigKey: validConfig, "broken": "nodeGroups: []"},
	})
	for _, tc := range []struct {
		ref     string
		wantErr string
	}{
		{ref: path},
		{ref: "configmap:kube-system/kwok-config"},
		{ref: "configmap:kube-system/kwok-config/config.yaml"},
		{ref: "configmap:kube-system/kwok-config/broken",
			wantErr: "ConfigMap kube-system/kwok-config key broken: invalid kwok cloud config: nodeGroups: at least one node group is required"},
		{ref: "configmap:kube-system/kwok-config/missing",
			wantErr: "reading kwok cloud config from ConfigMap kube-system/kwok-config key missing: the key is missing"},
		{ref: "configmap:kube-system/absent",
			wantErr: `reading kwok cloud config from ConfigMap kube-system/absent key config.yaml: configmaps "absent" not found`},
		{ref: filepath.Join(t.TempDir(), "absent.yaml"), wantErr: "no such file or directory"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			src, err := ParseSourceRef(tc.ref, client)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := src.Load(ctx)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.NodeGroups) != 2 {
				t.Errorf("got %d node groups, want 2", len(cfg.NodeGroups))
			}
		})
	}
	for _, bad := range []string{"", "configmap:", "configmap:ns", "configmap:ns/", "configmap:ns/name/", "configmap:a/b/c/d"} {
		if _, err := ParseSourceRef(bad, client); err == nil {
			t.Errorf("ParseSourceRef(%q): want an error", bad)
		}
	}
}
