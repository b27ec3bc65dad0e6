// Command benchplot draws the curves of docs/performance.md from the text of
// `make bench` (Go's benchmark format): the autoscaler loop's time against the
// node count, with and without CapacityQuotas and with anti-affinity, and the
// CapacityQuota check against upstream's way (every quota rescanned). Both are
// log-log, medians of the runs of each size.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "bench.out", "benchmark output to read")
	out := flag.String("out", "bench-plots", "directory the SVG files are written to")
	flag.Parse()
	written, err := run(*in, *out)
	for _, name := range written {
		fmt.Println("wrote", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// sample is one benchmark result: its base name, its name's key=value parts,
// and its time per operation in seconds.
type sample struct {
	base    string
	params  map[string]string
	seconds float64
}

// series is one curve: the results of base whose parameters include want and
// none of the keys in without, by node count.
type series struct {
	label   string
	base    string
	want    map[string]string
	without []string
}

// figure is one plot file.
type figure struct {
	file, title, yLabel string
	series              []series
}

var figures = []figure{
	{
		file: "bench-loop.svg", title: "Autoscaler loop (30 pods a node)", yLabel: "loop time (s)",
		series: []series{
			{label: "no quotas", base: "BenchmarkRunOnce"},
			{label: "CapacityQuotas", base: "BenchmarkRunOnceWithQuotas"},
			{label: "anti-affinity", base: "BenchmarkRunOnceAntiAffinity", want: map[string]string{"fastpath": "false"}},
		},
	},
	{
		file: "bench-capacityquota.svg", title: "CapacityQuota check, upstream-shaped fleet, one loop", yLabel: "time (s)",
		series: []series{
			{label: "rescan (upstream's way)", base: "BenchmarkCapacityCheck",
				want: map[string]string{"fleet": "upstream", "check": "rescan", "changed": "10%"}},
			{label: "indexed, 10% changed", base: "BenchmarkCapacityCheck",
				want: map[string]string{"fleet": "upstream", "check": "indexed", "changed": "10%"}},
			{label: "incremental, 10% changed", base: "BenchmarkCapacityCheck",
				want: map[string]string{"fleet": "upstream", "check": "incremental", "changed": "10%"}, without: []string{"templates"}},
			{label: "incremental, 1% changed", base: "BenchmarkCapacityCheck",
				want: map[string]string{"fleet": "upstream", "check": "incremental", "changed": "1%"}, without: []string{"templates"}},
		},
	},
}

// run reads in and writes every figure it has results for into dir. A figure
// without any result is an error: make bench runs every suite it draws.
func run(in, dir string) ([]string, error) {
	f, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	samples, err := read(f, in)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	var errs []error
	for _, fig := range figures {
		name := filepath.Join(dir, fig.file)
		if err := draw(fig, samples, name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fig.file, err))
			continue
		}
		written = append(written, name)
	}
	return written, errors.Join(errs...)
}

// read parses benchmark output, keeping every result's seconds per op.
func read(r io.Reader, name string) ([]sample, error) {
	reader := benchfmt.NewReader(r, name)
	var out []sample
	for reader.Scan() {
		res, ok := reader.Result().(*benchfmt.Result)
		if !ok {
			continue // a syntax error or unit metadata: not a result
		}
		// The reader converts ns/op to seconds.
		seconds, ok := res.Value("sec/op")
		if !ok {
			continue
		}
		base, parts := res.Name.Parts()
		// The reader drops the "Benchmark" every name starts with.
		s := sample{base: "Benchmark" + strings.TrimPrefix(string(base), "Benchmark"), params: map[string]string{}, seconds: seconds}
		for _, p := range parts {
			if k, v, ok := strings.Cut(strings.TrimPrefix(string(p), "/"), "="); ok {
				s.params[k] = v
			}
		}
		out = append(out, s)
	}
	return out, reader.Err()
}

// points are a series' medians by node count, in node order.
func (s series) points(samples []sample) plotter.XYs {
	byNodes := map[float64][]float64{}
	for _, smp := range samples {
		if !s.matches(smp) {
			continue
		}
		nodes, err := strconv.ParseFloat(smp.params["nodes"], 64)
		if err != nil {
			continue
		}
		byNodes[nodes] = append(byNodes[nodes], smp.seconds)
	}
	var xys plotter.XYs
	for nodes, times := range byNodes {
		xys = append(xys, plotter.XY{X: nodes, Y: median(times)})
	}
	slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
	return xys
}

func (s series) matches(smp sample) bool {
	if smp.base != s.base {
		return false
	}
	for k, v := range s.want {
		if smp.params[k] != v {
			return false
		}
	}
	for _, k := range s.without {
		if _, ok := smp.params[k]; ok {
			return false
		}
	}
	return true
}

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// draw writes one figure, log-log, as SVG.
func draw(fig figure, samples []sample, name string) error {
	p := plot.New()
	p.Title.Text = fig.title
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = fig.yLabel
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	var lines []any
	for _, s := range fig.series {
		if xys := s.points(samples); len(xys) > 0 {
			lines = append(lines, s.label, xys)
		}
	}
	if len(lines) == 0 {
		return errors.New("no result of its benchmarks in the input")
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, name)
}
