package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotascale/quotascale/deploy/dashboard"
)

const (
	shippedDashboard = "../../charts/quotascale/files/dashboard.json"
	demoRecording    = "testdata/demo-metrics.prom.gz"
	docsPicture      = "../../docs/images/dashboard.svg"
)

// TestDemoPicture: the renderer draws every panel of the shipped dashboard
// from the metrics recorded during `make demo`, each with data, and the
// picture in docs/getting-started.md is exactly what it draws.
func TestDemoPicture(t *testing.T) {
	var svg, warnings bytes.Buffer
	if err := render(context.Background(), &svg, shippedDashboard, demoRecording, &warnings); err != nil {
		t.Fatal(err)
	}
	if warnings.Len() > 0 {
		t.Errorf("panels without data:\n%s", warnings.String())
	}
	committed, err := os.ReadFile(docsPicture)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(svg.Bytes(), committed) {
		t.Errorf("%s is not what the renderer draws from %s; regenerate it with `go run ./hack/dashboardplot` (docs/getting-started.md says how)", docsPicture, demoRecording)
	}
}

// recordingFile writes a recording in the format localcluster --record-metrics writes.
func recordingFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.prom")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvaluate: each target runs over the recording one step per scrape,
// with the dashboard's variables at the values it opens with and
// $__rate_interval at four scrapes, and each series is named by its legend.
func TestEvaluate(t *testing.T) {
	path := recordingFile(t, `# TYPE quotascale_capacity_quota_used gauge
quotascale_capacity_quota_used{quota="q",resource="cpu"} 2 1000
quotascale_capacity_quota_used{quota="q",resource="cpu"} 4 6000
quotascale_capacity_quota_used{quota="q",resource="cpu"} 6 11000
quotascale_capacity_quota_used{quota="q",resource="memory"} 1e9 1000
quotascale_capacity_quota_used{quota="q",resource="memory"} 1e9 6000
quotascale_capacity_quota_used{quota="q",resource="memory"} 1e9 11000
# TYPE quotascale_capacity_quota_scale_up_blocked_total counter
quotascale_capacity_quota_scale_up_blocked_total{quota="q"} 0 1000
quotascale_capacity_quota_scale_up_blocked_total{quota="q"} 3 6000
quotascale_capacity_quota_scale_up_blocked_total{quota="q"} 3 11000
`)
	d, err := dashboard.Parse([]byte(`{
	  "templating": {"list": [{"name": "res", "type": "query", "allValue": ".*", "current": {"value": ["cpu"]}}]},
	  "panels": [
	    {"title": "used", "type": "timeseries", "targets": [{"expr": "quotascale_capacity_quota_used{resource=~\"$res\"}", "legendFormat": "{{quota}} {{resource}} {{node_group}}"}]},
	    {"title": "blocked", "type": "timeseries", "targets": [{"expr": "increase(quotascale_capacity_quota_scale_up_blocked_total[$__rate_interval])", "legendFormat": ""}]},
	    {"title": "a row", "type": "row"}
	  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := loadRecording(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.db.Close()
	if rec.interval.Seconds() != 5 {
		t.Errorf("scrape interval %s, want 5s", rec.interval)
	}
	got, err := evaluate(context.Background(), d, rec)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string][]line{}
	for _, p := range got {
		lines[p.Panel.Title] = p.Lines
	}
	// increase() over [20s] needs two samples in its window, so the first
	// step has none; it does not extrapolate a counter below zero.
	want := map[string][]line{
		"used":    {{Legend: "q cpu", X: []float64{0, 5, 10}, Y: []float64{2, 4, 6}}},
		"blocked": {{Legend: `{quota="q"}`, X: []float64{5, 10}, Y: []float64{3, 3}}},
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("evaluated panels (-want +got):\n%s", diff)
	}
}

// TestLoadRecordingRefuses: a sample without a timestamp, or a single
// scrape, is not a time series.
func TestLoadRecordingRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"no timestamp": {"# TYPE m gauge\nm 1 1000\nm 2\n", "has no timestamp"},
		"one scrape":   {"# TYPE m gauge\nm 1 1000\nn 2 1000\n", "holds 1 scrape"},
	} {
		t.Run(name, func(t *testing.T) {
			rec, err := loadRecording(context.Background(), recordingFile(t, tc.text))
			if err == nil {
				rec.db.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadRecording = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
