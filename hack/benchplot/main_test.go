package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gonum.org/v1/plot/plotter"
)

// TestRunDrawsRecordedResult draws both figures from a small recorded
// result (real benchmark output at small sizes, -benchtime=1x) and checks
// that each is a well-formed SVG document naming its series.
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
		"bench-loop.svg":          {"no quotas", "CapacityQuotas", "anti-affinity"},
		"bench-capacityquota.svg": {"rescan", "indexed, 10% changed", "incremental, 1% changed"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSVG(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, l := range labels {
			if !strings.Contains(string(data), l) {
				t.Errorf("%s does not name the series %q", name, l)
			}
		}
	}
}

// checkSVG parses data as XML to its end and checks that its root element is
// an SVG element with a size and at least one drawn path.
func checkSVG(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	var root *xml.StartElement
	paths := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("not well-formed XML: %w", err)
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == nil {
			root = &start
		}
		if start.Name.Local == "path" {
			paths++
		}
	}
	if root == nil || root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
		return fmt.Errorf("the root element is %v, want svg in the SVG namespace", root)
	}
	attrs := map[string]string{}
	for _, a := range root.Attr {
		attrs[a.Name.Local] = a.Value
	}
	if attrs["width"] == "" || attrs["height"] == "" {
		return fmt.Errorf("the svg element has no size: %v", root.Attr)
	}
	if paths == 0 {
		return errors.New("nothing is drawn: no path element")
	}
	return nil
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
		{series{base: "BenchmarkRunOnce"}, plotter.XYs{{X: 100, Y: 0.6591112025}, {X: 500, Y: 2.612210454}, {X: 1000, Y: 7.298774143}}},
		{series{base: "BenchmarkRunOnceAntiAffinity", want: map[string]string{"fastpath": "false"}}, plotter.XYs{{X: 1000, Y: 14.759103169}}},
		{series{base: "BenchmarkCapacityCheck", want: map[string]string{"check": "incremental", "changed": "10%"}, without: []string{"templates"}},
			plotter.XYs{{X: 500, Y: 269481.5e-9}, {X: 1500, Y: 9045304e-9}}},
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

// TestCheckSVGRefuses: the check fails on what a broken writer would leave.
func TestCheckSVGRefuses(t *testing.T) {
	const ok = `<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10pt" height="10pt"><path d="M0 0L1 1"/></svg>`
	if err := checkSVG([]byte(ok)); err != nil {
		t.Fatalf("a small valid SVG: %v", err)
	}
	for name, doc := range map[string]string{
		"truncated": ok[:len(ok)-10],
		"not svg":   `<html xmlns="http://www.w3.org/2000/svg" width="1" height="1"><path/></html>`,
		"no size":   `<svg xmlns="http://www.w3.org/2000/svg"><path/></svg>`,
		"empty":     `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>`,
		"nothing":   ``,
	} {
		if err := checkSVG([]byte(doc)); err == nil {
			t.Errorf("%s: checkSVG accepted %q", name, doc)
		}
	}
}
