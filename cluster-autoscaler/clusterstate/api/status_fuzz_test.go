package api

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// sampleStatus is a document as the autoscaler writes it, with every
// field set, so the fuzzer starts from the real shape.
func sampleStatus(t testing.TB) string {
	t.Helper()
	probe := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	s := Status{
		Time:             "2026-11-30 12:00:00 +0000 UTC",
		AutoscalerStatus: "Running",
		ClusterWide: ClusterWideStatus{
			Health: HealthCondition{Status: Healthy, NodeCounts: NodeCounts{Registered: RegisteredCounts{Total: 3, Ready: 2, NotStarted: 1,
				Unready: UnreadyCounts{Total: 1, ResourceUnready: 1}}, Unregistered: 1}, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleUp:   ScaleUpCondition{Status: InProgress, LastProbeTime: probe, LastTransitionTime: probe},
			ScaleDown: ScaleDownCondition{Status: CandidatesPresent, Candidates: 1, LastProbeTime: probe, LastTransitionTime: probe},
		},
		NodeGroups: []NodeGroupStatus{{
			Name:      "n2-standard-2",
			Health:    NodeGroupHealth{Status: Healthy, LastProbeTime: probe, LastTransitionTime: probe, CloudProviderTarget: 4, MinSize: 0, MaxSize: 20},
			ScaleUp:   NodeGroupScaleUp{Status: Backoff, LastProbeTime: probe, BackoffInfo: BackoffInfo{ErrorCode: "OUT_OF_RESOURCES", ErrorMessage: "stockout"}},
			ScaleDown: ScaleDownCondition{Status: NoCandidates, LastProbeTime: probe},
		}},
	}
	doc, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// TestParseStatusBadInput: kubectl-quota reads this document from a ConfigMap
// anyone with access may edit; a broken one is refused with the decoder's
// reason, never half-read.
func TestParseStatusBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"not YAML", "nodeGroups: [", "decoding the autoscaler status: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{"a count that is text", "clusterWide: {health: {nodeCounts: {unregistered: two}}}",
			"decoding the autoscaler status: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field NodeCounts.clusterWide.health.nodeCounts.unregistered of type int"},
		{"a probe time that is not RFC 3339", "clusterWide: {health: {lastProbeTime: yesterday}}",
			`decoding the autoscaler status: error unmarshaling JSON: while decoding JSON: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
		{"node groups as a map", "nodeGroups: {a: 1}",
			"decoding the autoscaler status: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go struct field Status.nodeGroups of type []api.NodeGroupStatus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStatus(tc.doc)
			if err == nil {
				t.Fatalf("want error %q, got none", tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
	// Unknown fields are ignored, as upstream's readers do: newer autoscalers
	// add fields.
	if _, err := ParseStatus(sampleStatus(t) + "futureField: 1\n"); err != nil {
		t.Errorf("an unknown field was refused: %v", err)
	}
}

// FuzzParseStatus feeds arbitrary documents to ParseStatus. It must not panic;
// a refusal must carry its prefix; and what it accepts must survive being
// written back the way the autoscaler writes it: the first re-encoding is a
// fixed point of decode and encode.
func FuzzParseStatus(f *testing.F) {
	f.Add(sampleStatus(f))
	f.Add("autoscalerStatus: Initializing\nclusterWide: {health: {status: \"\"}}\n")
	f.Add(`{"nodeGroups":[{"name":"a","health":{"status":"Healthy","cloudProviderTarget":-1,"lastProbeTime":null}}]}`)
	f.Add("clusterWide: {scaleUp: {lastTransitionTime: \"2026-11-30T12:00:00+05:30\"}}")
	f.Add("- 1\n- 2")
	f.Fuzz(func(t *testing.T, doc string) {
		s, err := ParseStatus(doc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "decoding the autoscaler status: ") {
				t.Fatalf("error without its prefix: %v", err)
			}
			return
		}
		once, err := yaml.Marshal(s)
		if err != nil {
			// metav1.Time cannot encode years past 9999, which RFC 3339
			// cannot spell either; the decoder never produces them.
			t.Fatalf("an accepted status does not encode: %v", err)
		}
		again, err := ParseStatus(string(once))
		if err != nil {
			t.Fatalf("the encoding of an accepted status is refused: %v\n%s", err, once)
		}
		twice, err := yaml.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(once), string(twice)); diff != "" {
			t.Fatalf("decode and encode is not stable (-first +second):\n%s", diff)
		}
	})
}
