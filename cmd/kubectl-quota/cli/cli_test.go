package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
	"github.com/quotascale/quotascale/cmd/kubectl-quota/internal/report"
	"github.com/quotascale/quotascale/pkg/version"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestExplainTarget(t *testing.T) {
	tests := []struct {
		args     []string
		wantKind string
		want     string
		wantErr  string
	}{
		{[]string{"pod", "web-1"}, targetPod, "web-1", ""},
		{[]string{"pods", "web-1"}, targetPod, "web-1", ""},
		{[]string{"po", "web-1"}, targetPod, "web-1", ""},
		{[]string{"pod/web-1"}, targetPod, "web-1", ""},
		{[]string{"web-1"}, targetPod, "web-1", ""},
		{[]string{"podgroup", "trainer"}, targetPodGroup, "trainer", ""},
		{[]string{"podgroups/trainer"}, targetPodGroup, "trainer", ""},
		{[]string{"PodGroup.scheduling.k8s.io/trainer"}, targetPodGroup, "trainer", ""},
		{[]string{"deployment", "web"}, "", "", `only pods and podgroups can be explained, not "deployment"`},
		{[]string{"pod/"}, "", "", "a pod name is required"},
		{[]string{"podgroup/"}, "", "", "a podgroup name is required"},
	}
	for _, tt := range tests {
		kind, got, err := explainTarget(tt.args)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("explainTarget(%q) error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || kind != tt.wantKind || got != tt.want {
			t.Errorf("explainTarget(%q) = %q, %q, %v; want %q, %q", tt.args, kind, got, err, tt.wantKind, tt.want)
		}
	}
}

// upstreamStatusDocument is a status document in the format upstream's
// autoscaler writes (kubernetes-sigs/cluster-autoscaler pkg/clusterstate/api),
// written out by hand so that the reader is checked against the format and
// not against our own encoder.
const upstreamStatusDocument = `time: 2026-11-30 12:00:00.123 +0000 UTC
autoscalerStatus: Running
clusterWide:
  health:
    status: Unhealthy
    nodeCounts:
      registered:
        total: 9
        ready: 4
        notStarted: 0
        suspended: 0
        unready:
          total: 5
          resourceUnready: 0
      longUnregistered: 0
      unregistered: 0
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:40:00Z"
  scaleUp:
    status: NoActivity
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:00:00Z"
  scaleDown:
    status: NoCandidates
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:00:00Z"
nodeGroups:
- name: n2-standard-2
  health:
    status: Healthy
    nodeCounts:
      registered:
        total: 3
        ready: 3
        notStarted: 0
        suspended: 0
        unready:
          total: 0
          resourceUnready: 0
      longUnregistered: 0
      unregistered: 1
    cloudProviderTarget: 4
    minSize: 1
    maxSize: 20
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:00:00Z"
  scaleUp:
    status: Backoff
    backoffInfo:
      errorCode: OUT_OF_RESOURCES
      errorMessage: no n2 left
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:50:00Z"
  scaleDown:
    status: NoCandidates
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:00:00Z"
- name: gpu
  health:
    status: Unhealthy
    nodeCounts:
      registered:
        total: 6
        ready: 1
        notStarted: 0
        suspended: 0
        unready:
          total: 5
          resourceUnready: 5
      longUnregistered: 0
      unregistered: 0
    cloudProviderTarget: 6
    minSize: 0
    maxSize: 8
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:40:00Z"
  scaleUp:
    status: Unhealthy
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:40:00Z"
  scaleDown:
    status: NoCandidates
    lastProbeTime: "2026-11-30T12:00:00Z"
    lastTransitionTime: "2026-11-30T11:00:00Z"
`

// TestAutoscalerStatus reads a document in upstream's format: sizes,
// backoff and health of each group, and the cluster's health.
func TestAutoscalerStatus(t *testing.T) {
	written := time.Date(2026, 11, 30, 12, 0, 0, 123000000, time.UTC)
	doc, err := api.ParseStatus(upstreamStatusDocument)
	if err != nil {
		t.Fatal(err)
	}
	got := autoscalerStatus("ConfigMap kube-system/cluster-autoscaler-status", doc)
	want := &report.AutoscalerStatus{
		Source:    "ConfigMap kube-system/cluster-autoscaler-status",
		Time:      written,
		Unhealthy: "5 of 9 registered nodes are unready",
		NodeGroups: []report.NodeGroupStatus{
			{Name: "n2-standard-2", MinSize: 1, MaxSize: 20, Target: 4, Registered: 3, Unregistered: 1, Backoff: "OUT_OF_RESOURCES: no n2 left"},
			{Name: "gpu", MinSize: 0, MaxSize: 8, Target: 6, Registered: 6, Unhealthy: "1 of its 6 nodes are ready (target 6)"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("autoscaler status (-want +got):\n%s", diff)
	}
	if got := autoscalerStatus("x", api.Status{Time: "not a time"}); !got.Time.IsZero() || got.NodeGroups != nil {
		t.Errorf("an unparsable time: %+v", got)
	}
}

func TestVersionAndFlags(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || out != version.String()+"\n" {
		t.Errorf("version printed %q, %v", out, err)
	}
	out, err = run(t, "--version")
	if want := "kubectl-quota " + version.String() + "\n"; err != nil || out != want {
		t.Errorf("--version printed %q, %v; want %q", out, err, want)
	}
	if _, err := run(t, "tree", "-o", "xml"); err == nil || !strings.Contains(err.Error(), `--output "xml" is not one of table, json, yaml`) {
		t.Errorf("-o xml: %v", err)
	}
	if _, err := run(t, "explain", "deployment", "web"); err == nil || !strings.Contains(err.Error(), "only pods") {
		t.Errorf("explain deployment: %v", err)
	}
	if _, err := run(t, "capacity", "--kubeconfig", "/nonexistent/kubeconfig"); err == nil {
		t.Error("a missing kubeconfig is not an error")
	}
}

func TestPrintFormats(t *testing.T) {
	r := report.CapacityReport{Kind: "CapacityReport", APIVersion: report.APIVersion, Quotas: []report.CapacityQuotaView{}}
	for _, tt := range []struct{ output, want string }{
		{OutputJSON, "{\n  \"kind\": \"CapacityReport\",\n  \"apiVersion\": \"kubectl-quota.quotascale.io/v1alpha1\",\n  \"quotas\": []\n}\n"},
		{OutputYAML, "apiVersion: kubectl-quota.quotascale.io/v1alpha1\nkind: CapacityReport\nquotas: []\n"},
		{OutputTable, "No CapacityQuotas found.\n"},
	} {
		var out bytes.Buffer
		o := &options{output: tt.output, streams: genericiooptions.IOStreams{Out: &out}}
		if err := o.print(r, func(w io.Writer) error { return report.PrintCapacity(w, r) }); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("-o %s printed %q, want %q", tt.output, out.String(), tt.want)
		}
	}
}
