package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gonum.org/v1/plot/plotter"
)

// TestRunDrawsRecordedResult draws both figures from a small recorded
// result and checks that each is an SVG file naming its series.
func TestRunDrawsRecordedResult(t *testing.T) {
	dir := t.TempDir()
	written, err := run("testdata/bench.txt", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(figures) {
		t.Fatalf("wrote %v, want %d figures", written, len(figures))
	}
	for name, labels := range map[string][]string{
		"loop.svg":          {"no quotas", "CapacityQuotas", "anti-affinity"},
		"capacityquota.svg": {"rescan", "indexed, 10% changed", "incremental, 1% changed"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		svg := string(data)
		if !strings.Contains(svg, "<svg") {
			t.Errorf("%s is not an SVG document", name)
		}
		for _, l := range labels {
			if !strings.Contains(svg, l) {
				t.Errorf("%s does not name the series %q", name, l)
			}
		}
	}
}

// TestSeriesPoints: a series' points are the medians of its results by node
// count, and only the results its parameters select.
func TestSeriesPoints(t *testing.T) {
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := read(f, "bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    series
		want plotter.XYs
	}{
		{series{base: "BenchmarkRunOnce"}, plotter.XYs{{X: 100, Y: 0.203}, {X: 1000, Y: 2.3}}},
		{series{base: "BenchmarkRunOnceAntiAffinity", want: map[string]string{"fastpath": "false"}}, plotter.XYs{{X: 1000, Y: 4.06}}},
		{series{base: "BenchmarkCapacityCheck", want: map[string]string{"check": "incremental", "changed": "10%"}, without: []string{"templates"}},
			plotter.XYs{{X: 500, Y: 19e-6}, {X: 5000, Y: 537e-6}}},
	} {
		if diff := cmp.Diff(tc.want, tc.s.points(samples), cmpopts.EquateApprox(1e-9, 0)); diff != "" {
			t.Errorf("points of %+v (-want +got):\n%s", tc.s, diff)
		}
	}
}

func TestRunRefusesInputWithoutResults(t *testing.T) {
	in := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(in, []byte("goos: linux\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(in, t.TempDir()); err == nil {
		t.Error("run drew figures from an input without results")
	}
}
