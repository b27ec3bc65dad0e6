package capacityscheduling

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestDecodeArgsBadInput is the reviewable list of bad pluginConfig args with
// the exact error the scheduler refuses to start with, and the defaults a
// profile without args gets. The plugin never starts with a half-read
// configuration: any error stops New.
func TestDecodeArgsBadInput(t *testing.T) {
	yamlArgs := func(doc string) runtime.Object {
		return &runtime.Unknown{Raw: []byte(doc), ContentType: runtime.ContentTypeYAML}
	}
	for _, tc := range []struct {
		name string
		args runtime.Object
		want string
	}{
		{"zero interval", yamlArgs("statusUpdateInterval: 0s"),
			"CapacityScheduling args: statusUpdateInterval must be positive, got 0s"},
		{"negative interval", yamlArgs("statusUpdateInterval: -2s"),
			"CapacityScheduling args: statusUpdateInterval must be positive, got -2s"},
		{"interval without a unit", yamlArgs("statusUpdateInterval: \"5\""),
			`decoding CapacityScheduling args: error unmarshaling JSON: while decoding JSON: time: missing unit in duration "5"`},
		{"zero candidate nodes", yamlArgs("minCandidateNodesAbsolute: 0"),
			"CapacityScheduling args: minCandidateNodesAbsolute must be positive, got 0"},
		{"candidate nodes as text", &runtime.Unknown{Raw: []byte(`{"minCandidateNodesAbsolute":"all"}`), ContentType: runtime.ContentTypeJSON},
			"decoding CapacityScheduling args: json: cannot unmarshal string into Go struct field Args.minCandidateNodesAbsolute of type int32"},
		{"writeStatus as text", yamlArgs("writeStatus: \"no\""),
			"decoding CapacityScheduling args: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field Args.writeStatus of type bool"},
		{"typed object instead of raw args", &corev1.Pod{},
			"decoding CapacityScheduling args: want args of type runtime.Unknown, got *v1.Pod"},
		{"unsupported content type", &runtime.Unknown{Raw: []byte("x"), ContentType: "application/vnd.kubernetes.protobuf"},
			"decoding CapacityScheduling args: not supported content type application/vnd.kubernetes.protobuf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeArgs(tc.args)
			if err == nil {
				t.Fatalf("want error %q, got none", tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
	args, err := decodeArgs(nil)
	if err != nil {
		t.Fatalf("no args: %v", err)
	}
	got := []any{args.StatusUpdateInterval.Duration, *args.MinCandidateNodesAbsolute, *args.WriteStatus}
	if diff := cmp.Diff([]any{2 * time.Second, int32(100), true}, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// FuzzDecodeArgs: arbitrary pluginConfig args, as YAML or JSON, never panic
// the decoder, and args it accepts are complete and in range.
func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte("statusUpdateInterval: 5s\nminCandidateNodesAbsolute: 50\nwriteStatus: false"), true)
	f.Add([]byte(`{"statusUpdateInterval":"-1s"}`), false)
	f.Add([]byte(`{"minCandidateNodesAbsolute":2147483648}`), false)
	f.Add([]byte("{"), true)
	f.Fuzz(func(t *testing.T, raw []byte, yaml bool) {
		contentType := runtime.ContentTypeJSON
		if yaml {
			contentType = runtime.ContentTypeYAML
		}
		args, err := decodeArgs(&runtime.Unknown{Raw: raw, ContentType: contentType})
		if err != nil {
			return
		}
		if args.StatusUpdateInterval == nil || args.StatusUpdateInterval.Duration <= 0 ||
			args.MinCandidateNodesAbsolute == nil || *args.MinCandidateNodesAbsolute <= 0 || args.WriteStatus == nil {
			t.Fatalf("accepted incomplete or out-of-range args %+v from %q", args, raw)
		}
	})
}
