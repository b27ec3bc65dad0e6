package capacity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
)

// TestBadInputTable is the reviewable list of CapacityQuotas the API server
// accepts (the CRD does not validate selectors, and a quota may bypass the
// schema) but the autoscaler judges invalid, written as YAML the way people
// write them, with the exact message of the valid condition. TestValidation
// covers the limits rules and the forbidden keys; these are other shapes of
// broken selectors and quantities. What the API server refuses outright is in
// test/e2e/badinput_test.go.
func TestBadInputTable(t *testing.T) {
	tests := []struct {
		name  string
		quota string
		want  string
	}{
		{
			name:  "label key with a space",
			quota: `{selector: {matchLabels: {"pool name": a}}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: key: Invalid value: "pool name": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
		{
			name:  "label value with a slash",
			quota: `{selector: {matchLabels: {pool: a/b}}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: values[0][pool]: Invalid value: "a/b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		},
		{
			name:  "Exists with values",
			quota: `{selector: {matchExpressions: [{key: pool, operator: Exists, values: [a]}]}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: values: Invalid value: ["a"]: values set must be empty for exists and does not exist`,
		},
		{
			name:  "DoesNotExist with values",
			quota: `{selector: {matchExpressions: [{key: spot, operator: DoesNotExist, values: ["true"]}]}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: values: Invalid value: ["true"]: values set must be empty for exists and does not exist`,
		},
		{
			name:  "NotIn without values",
			quota: `{selector: {matchExpressions: [{key: pool, operator: NotIn, values: []}]}, limits: {resources: {cpu: 8}}}`,
			// apimachinery prints an explicitly empty list as null.
			want: `selector is invalid: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty`,
		},
		{
			// Gt is a node selector operator; quotas take label selectors.
			name:  "node selector operator",
			quota: `{selector: {matchExpressions: [{key: cores, operator: Gt, values: ["8"]}]}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: "Gt" is not a valid label selector operator`,
		},
		{
			name:  "operator in lower case",
			quota: `{selector: {matchExpressions: [{key: pool, operator: in, values: [a]}]}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: "in" is not a valid label selector operator`,
		},
		{
			name:  "empty expression key",
			quota: `{selector: {matchExpressions: [{key: "", operator: Exists}]}, limits: {resources: {cpu: 8}}}`,
			want:  `selector is invalid: key: Invalid value: "": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
		{
			name:  "forbidden key in a NotIn expression",
			quota: `{selector: {matchExpressions: [{key: node.kubernetes.io/instance-type, operator: NotIn, values: [e2-small]}]}, limits: {resources: {cpu: 8}}}`,
			want:  `selector must not use label key "node.kubernetes.io/instance-type"`,
		},
		{
			name:  "fraction by exponent",
			quota: `{limits: {resources: {nodes: 1e-3}}}`,
			want:  "limit nodes must be a non-negative integer, got 0.001",
		},
		{
			name:  "negative by exponent",
			quota: `{limits: {resources: {memory: -1e3}}}`,
			want:  "limit memory must be a non-negative integer, got -1000",
		},
		{
			name:  "empty resource name",
			quota: `{limits: {resources: {"": 1}}}`,
			want:  `limit resource name "" must be 1 to 63 characters`,
		},
		{
			// What the API server refuses (spec.limits.resources is required)
			// limits nothing here: it is not an error to the library.
			name:  "no limits at all",
			quota: `{selector: {matchLabels: {pool: a}}}`,
			want:  autoscalingv1beta1.ValidMessage,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &autoscalingv1beta1.CapacityQuota{}
			if err := yaml.UnmarshalStrict([]byte(tt.quota), &q.Spec); err != nil {
				t.Fatalf("test input does not decode: %v", err)
			}
			q.Name = "q"
			status := Build([]*autoscalingv1beta1.CapacityQuota{q}, Options{}).Status()
			want := []QuotaStatus{{Name: "q", Valid: tt.want == autoscalingv1beta1.ValidMessage, Message: tt.want}}
			for i := range status {
				status[i].Used, status[i].Upcoming = nil, nil
			}
			if diff := cmp.Diff(want, status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}
