package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/quotascale/quotascale/deploy/dashboard"
)

// line is one series of a panel: its legend and its points, x in seconds
// from the recording's start.
type line struct {
	Legend string
	X, Y   []float64
}

// panelData is a panel's series as Grafana would draw them.
type panelData struct {
	Panel dashboard.Panel
	Lines []line
}

// rateIntervalScrapes is Grafana's floor for $__rate_interval: four scrape
// intervals, so that a rate always spans at least two samples.
const rateIntervalScrapes = 4

// evaluate runs every target of every time series panel as a range query
// over the whole recording, one step per scrape, with the dashboard's
// variables at the values it opens with.
func evaluate(ctx context.Context, d dashboard.Dashboard, rec *recording) ([]panelData, error) {
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:    10_000_000,
		Timeout:       time.Minute,
		LookbackDelta: 5 * time.Minute,
	})
	defer engine.Close()
	vars := d.Opened()
	rateInterval := rateIntervalScrapes * rec.interval
	var out []panelData
	for _, p := range d.AllPanels() {
		if p.Type != "timeseries" {
			continue
		}
		data := panelData{Panel: p}
		for _, target := range p.Targets {
			expr := dashboard.Expand(target.Expr, vars, rateInterval)
			lines, err := rangeQuery(ctx, engine, rec, expr, target.LegendFormat)
			if err != nil {
				return nil, fmt.Errorf("panel %q: %w", p.Title, err)
			}
			data.Lines = append(data.Lines, lines...)
		}
		slices.SortStableFunc(data.Lines, func(a, b line) int { return strings.Compare(a.Legend, b.Legend) })
		out = append(out, data)
	}
	return out, nil
}

func rangeQuery(ctx context.Context, engine *promql.Engine, rec *recording, expr, legend string) ([]line, error) {
	q, err := engine.NewRangeQuery(ctx, rec.db, nil, expr, rec.start, rec.end, rec.interval)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("%s: %w", expr, res.Err)
	}
	matrix, err := res.Matrix()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	var out []line
	for _, s := range matrix {
		l := line{Legend: dashboard.Legend(legend, s.Metric.Get)}
		if l.Legend == "" {
			l.Legend = s.Metric.String()
		}
		for _, pt := range s.Floats {
			l.X = append(l.X, float64(pt.T-rec.start.UnixMilli())/1000)
			l.Y = append(l.Y, pt.F)
		}
		out = append(out, l)
	}
	return out, nil
}
