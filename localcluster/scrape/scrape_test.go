package scrape

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

func gauge(name string, values map[string]float64) *dto.MetricFamily {
	f := &dto.MetricFamily{Name: new(name), Help: new("help"), Type: dto.MetricType_GAUGE.Enum()}
	for quota, v := range values {
		f.Metric = append(f.Metric, &dto.Metric{
			Label: []*dto.LabelPair{{Name: new("quota"), Value: new(quota)}},
			Gauge: &dto.Gauge{Value: new(v)},
		})
	}
	return f
}

// TestRecorderWritesTimeSeries: every scrape's counters and gauges come back,
// through Prometheus' own text parser, as samples stamped with the scrape's
// time, each series in time order; histograms are left out.
func TestRecorderWritesTimeSeries(t *testing.T) {
	scrapes := [][]*dto.MetricFamily{
		{gauge("used", map[string]float64{"b": 1, "a": 2}), {
			Name: new("duration"), Type: dto.MetricType_HISTOGRAM.Enum(),
			Metric: []*dto.Metric{{Histogram: &dto.Histogram{SampleCount: new(uint64(1)), SampleSum: new(0.5)}}},
		}},
		{gauge("used", map[string]float64{"a": 3, "b": 4})},
	}
	next := 0
	r := NewRecorder(func() ([]*dto.MetricFamily, error) {
		next++
		return scrapes[next-1], nil
	})
	t0 := time.UnixMilli(1_000_000)
	for i := range scrapes {
		if err := r.Scrape(t0.Add(time.Duration(i) * 5 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	type sample struct {
		Series string
		T      int64
		V      float64
	}
	var got []sample
	p := textparse.NewPromParser(buf.Bytes(), labels.NewSymbolTable(), false)
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%v in:\n%s", err, buf.String())
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, ts, v := p.Series()
		if ts == nil {
			t.Fatalf("a sample without a timestamp in:\n%s", buf.String())
		}
		var l labels.Labels
		p.Labels(&l)
		got = append(got, sample{l.String(), *ts, v})
	}
	want := []sample{
		{`{__name__="used", quota="a"}`, 1_000_000, 2},
		{`{__name__="used", quota="a"}`, 1_005_000, 3},
		{`{__name__="used", quota="b"}`, 1_000_000, 1},
		{`{__name__="used", quota="b"}`, 1_005_000, 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded samples (-want +got):\n%s", diff)
	}
	if r.Scrapes() != 2 {
		t.Errorf("Scrapes() = %d, want 2", r.Scrapes())
	}
}
