package capacityscheduling

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedulervalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/utils/ptr"
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
		{"zero hold", yamlArgs("reclaimHoldDuration: 0s"),
			"CapacityScheduling args: reclaimHoldDuration must be positive, got 0s"},
		{"zero candidate nodes", yamlArgs("minCandidateNodesAbsolute: 0"),
			"CapacityScheduling args: minCandidateNodesAbsolute must be positive, got 0"},
		{"candidate nodes as text", &runtime.Unknown{Raw: []byte(`{"minCandidateNodesAbsolute":"all"}`), ContentType: runtime.ContentTypeJSON},
			"decoding CapacityScheduling args: json: cannot unmarshal string into Go struct field Args.minCandidateNodesAbsolute of type int32"},
		{"writeStatus as text", yamlArgs("writeStatus: \"no\""),
			"decoding CapacityScheduling args: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field Args.writeStatus of type bool"},
		{"candidate percentage past 100", yamlArgs("minCandidateNodesPercentage: 101"),
			"CapacityScheduling args.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"},
		{"a webhook without a certificate", yamlArgs("webhook: {bindAddress: ':9443'}"),
			"CapacityScheduling args: webhook needs bindAddress, certFile and keyFile, got {BindAddress::9443 CertFile: KeyFile:}"},
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
	got := []any{args.StatusUpdateInterval.Duration, args.ReclaimHoldDuration.Duration, args.holdSweepInterval(), *args.MinCandidateNodesAbsolute, *args.WriteStatus}
	if diff := cmp.Diff([]any{2 * time.Second, 2 * time.Minute, 10 * time.Second, int32(100), true}, got); diff != "" {
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
			args.ReclaimHoldDuration == nil || args.ReclaimHoldDuration.Duration <= 0 ||
			args.MinCandidateNodesAbsolute == nil || *args.MinCandidateNodesAbsolute <= 0 || args.WriteStatus == nil {
			t.Fatalf("accepted incomplete or out-of-range args %+v from %q", args, raw)
		}
	})
}

// TestSampleConfiguration: docs/scheduler-config.yaml is a configuration
// kube-scheduler accepts, and its CapacityScheduling args decode as written.
func TestSampleConfiguration(t *testing.T) {
	raw, err := os.ReadFile("../../docs/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := schedulerscheme.Codecs.UniversalDecoder().Decode(raw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := obj.(*schedulerapi.KubeSchedulerConfiguration)
	if err := schedulervalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, profile := range cfg.Profiles {
		for _, pc := range profile.PluginConfig {
			if pc.Name != Name {
				continue
			}
			found = true
			args, err := decodeArgs(pc.Args)
			if err != nil {
				t.Fatal(err)
			}
			want := Args{
				StatusUpdateInterval:        &metav1.Duration{Duration: 2 * time.Second},
				ReclaimHoldDuration:         &metav1.Duration{Duration: 2 * time.Minute},
				MinCandidateNodesPercentage: ptr.To[int32](10),
				MinCandidateNodesAbsolute:   ptr.To[int32](100),
				WriteStatus:                 ptr.To(true),
				Webhook:                     &WebhookArgs{BindAddress: ":9443", CertFile: "/etc/quotascale/webhook/tls.crt", KeyFile: "/etc/quotascale/webhook/tls.key"},
			}
			if diff := cmp.Diff(want, args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		}
	}
	if !found {
		t.Error("no CapacityScheduling args in the sample")
	}
}
