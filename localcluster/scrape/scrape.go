// Package scrape takes what Prometheus would scrape from Quotascale's
// autoscaler and scheduler running in this process, and records scrapes
// over time (localcluster --record-metrics) for hack/dashboardplot.
package scrape

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Quotascale is what Prometheus scrapes from Quotascale's two programs
// when both run in this process: the autoscaler's own registry
// (cluster_autoscaler_ and quotascale_ families) and the ElasticQuotaTree
// families the in-process kube-scheduler serves from the process-wide
// registry. Families are sorted by name.
func Quotascale(autoscaler prometheus.Gatherer) ([]*dto.MetricFamily, error) {
	ca, err := autoscaler.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering the autoscaler's metrics: %w", err)
	}
	sched, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering the scheduler's metrics: %w", err)
	}
	var out []*dto.MetricFamily
	for _, f := range ca {
		if strings.HasPrefix(f.GetName(), "cluster_autoscaler_") || strings.HasPrefix(f.GetName(), "quotascale_") {
			out = append(out, f)
		}
	}
	for _, f := range sched {
		if strings.HasPrefix(f.GetName(), "quotascale_elastic_quota_") {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// Recorder keeps the counters and gauges of successive scrapes, each
// sample stamped with its scrape's time, as a Prometheus server would store
// them. Histograms and summaries are left out: the autoscaler's function
// durations alone are hundreds of buckets a scrape.
type Recorder struct {
	gather func() ([]*dto.MetricFamily, error)

	mu       sync.Mutex
	families map[string]*dto.MetricFamily
	scrapes  int
}

// NewRecorder records what gather returns at each scrape.
func NewRecorder(gather func() ([]*dto.MetricFamily, error)) *Recorder {
	return &Recorder{gather: gather, families: map[string]*dto.MetricFamily{}}
}

// Scrape gathers once and keeps the samples, stamped with now.
func (r *Recorder) Scrape(now time.Time) error {
	families, err := r.gather()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range families {
		if t := f.GetType(); t != dto.MetricType_COUNTER && t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED {
			continue
		}
		kept, ok := r.families[f.GetName()]
		if !ok {
			kept = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
			r.families[f.GetName()] = kept
		}
		for _, m := range f.GetMetric() {
			m.TimestampMs = new(now.UnixMilli())
			kept.Metric = append(kept.Metric, m)
		}
	}
	r.scrapes++
	return nil
}

// Run scrapes every interval until ctx ends, and once more at the end, as
// the last scrape of a run shows where it ended.
func (r *Recorder) Run(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := r.Scrape(time.Now()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return r.Scrape(time.Now())
		case <-tick.C:
		}
	}
}

// Scrapes is how many scrapes the recorder holds.
func (r *Recorder) Scrapes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.scrapes
}

// WriteTo writes every family once in Prometheus' text format, each series'
// samples in time order with their timestamps: what Prometheus' text parser
// reads line by line into a time series database.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.families))
	for name := range r.families {
		names = append(names, name)
	}
	slices.Sort(names)
	var written int64
	for _, name := range names {
		f := r.families[name]
		// A stable sort by labels keeps each series' samples in scrape order.
		slices.SortStableFunc(f.Metric, func(a, b *dto.Metric) int { return strings.Compare(labelKey(a), labelKey(b)) })
		n, err := expfmt.MetricFamilyToText(w, f)
		written += int64(n)
		if err != nil {
			return written, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return written, nil
}

// WriteFile writes the recording to path, gzip-compressed when path ends in .gz.
func (r *Recorder) WriteFile(path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if !strings.HasSuffix(path, ".gz") {
		_, err = r.WriteTo(f)
		return err
	}
	gz := gzip.NewWriter(f)
	if _, err := r.WriteTo(gz); err != nil {
		return err
	}
	return gz.Close()
}

func labelKey(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		b.WriteString(l.GetName())
		b.WriteByte(0)
		b.WriteString(l.GetValue())
		b.WriteByte(0)
	}
	return b.String()
}
