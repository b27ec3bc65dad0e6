package kwok

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBadInputTable adds to TestConfigErrors the bad node group configs it does
// not cover, each with the exact error people read in the autoscaler's log and
// the cloud's events. A config that does not parse or validate changes nothing:
// ParseConfig returns no config at all, so the caller keeps the one it has.
func TestBadInputTable(t *testing.T) {
	const shape = `capacity: {cpu: "1", memory: 1Gi}`
	tests := []struct {
		name, config, want string
	}{
		{"null node groups", "nodeGroups: null",
			"invalid kwok cloud config: nodeGroups: at least one node group is required"},
		{"size is not a number", "nodeGroups: [{name: a, maxSize: three, " + shape + "}]",
			"parsing kwok cloud config: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field NodeGroupConfig.nodeGroups.maxSize of type int"},
		{"a list, not a config", "- name: a",
			"parsing kwok cloud config: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type kwok.Config"},
		{"negative max with zero min", "nodeGroups: [{name: a, maxSize: -1, " + shape + "}]",
			"invalid kwok cloud config: nodeGroups[0] (a): maxSize -1 is less than minSize 0"},
		{
			// A name that is not a label is left out of the path: the path must
			// point at the entry, the message quotes the name.
			"two bad names are not called duplicates of each other by name",
			"nodeGroups: [{name: A, maxSize: 1, " + shape + "}, {name: A, maxSize: 1, " + shape + "}]",
			`invalid kwok cloud config: nodeGroups[0]: name "A" must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit; ` +
				`nodeGroups[1]: name "A" must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit; ` +
				`nodeGroups[1]: name "A" is also used by nodeGroups[0]`,
		},
		{"name ending in a dash", "nodeGroups: [{name: a-, maxSize: 1, " + shape + "}]",
			`invalid kwok cloud config: nodeGroups[0]: name "a-" must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`},
		{"only memory missing", `nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: "1"}}]`,
			"invalid kwok cloud config: nodeGroups[0] (a): capacity.memory is required"},
		{"hostname label is the cloud's", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", labels: {kubernetes.io/hostname: x}}]",
			"invalid kwok cloud config: nodeGroups[0] (a): labels: kubernetes.io/hostname is set by the cloud and cannot be configured"},
		{"label key prefix not a DNS subdomain", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", labels: {Example.com/x: y}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): labels: "Example.com/x" is not a valid label key`},
		{"label value too long", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", labels: {zone: " + strings.Repeat("z", 64) + "}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): labels[zone]: "` + strings.Repeat("z", 64) + `" is not a valid label value`},
		{"taint without an effect", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", taints: [{key: dedicated, value: gpu}]}]",
			`invalid kwok cloud config: nodeGroups[0] (a): taints[0].effect: "" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{"allocatable not a quantity", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", allocatable: {cpu: lots}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): allocatable.cpu: "lots" is not a quantity`},
		{"allocatable negative", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", allocatable: {memory: -1Gi}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): allocatable.memory: "-1Gi" is negative`},
		{"allocatable resource name", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", allocatable: {\"gpu s\": \"1\"}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): allocatable: "gpu s" is not a valid resource name`},
		{
			// pods defaults to 110 only when capacity does not name it; a broken
			// pods is reported once, not also as "not in capacity".
			"bad pods capacity with a pods allocatable",
			"nodeGroups: [{name: a, maxSize: 1, capacity: {cpu: \"1\", memory: 1Gi, pods: many}, allocatable: {pods: \"10\"}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): capacity.pods: "many" is not a quantity`,
		},
		{"delay without a unit", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", provisioningDelay: \"30\"}]",
			`invalid kwok cloud config: nodeGroups[0] (a): provisioningDelay: "30" is not a duration such as "2s" or "1m30s"`},
		{"error code of 64 characters", "nodeGroups: [{name: a, maxSize: 1, " + shape + ", failures: {errorCode: " + strings.Repeat("E", 64) + "}}]",
			`invalid kwok cloud config: nodeGroups[0] (a): failures.errorCode: "` + strings.Repeat("E", 64) + `" must be 1 to 63 letters, digits, '_', '-' or '.'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.config))
			if cfg != nil {
				t.Errorf("ParseConfig returned a config along with the error")
			}
			if err == nil {
				t.Fatalf("want error %q, got none", tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
