// Command dashboardplot draws the Grafana dashboard the chart ships
// (charts/quotascale/files/dashboard.json) from a recorded run, as Grafana
// would show it: the run's metrics (localcluster --record-metrics) are loaded
// into a Prometheus time series database, every panel's PromQL is evaluated
// by Prometheus' engine with the dashboard's variables at the values it opens
// with, and the panels are drawn on Grafana's grid into one SVG.
//
//	go run ./cmd/localcluster --demo --record-metrics=/tmp/demo-metrics.prom.gz
//	go run ./hack/dashboardplot -metrics /tmp/demo-metrics.prom.gz -out docs/images/dashboard.svg
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/quotascale/quotascale/deploy/dashboard"
)

func main() {
	metrics := flag.String("metrics", "hack/dashboardplot/testdata/demo-metrics.prom.gz", "metrics recorded by localcluster --record-metrics")
	dashboardPath := flag.String("dashboard", "charts/quotascale/files/dashboard.json", "Grafana dashboard to draw")
	out := flag.String("out", "docs/images/dashboard.svg", "SVG to write")
	flag.Parse()
	var buf bytes.Buffer
	err := render(context.Background(), &buf, *dashboardPath, *metrics, os.Stderr)
	if err == nil {
		err = os.WriteFile(*out, buf.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboardplot:", err)
		os.Exit(1)
	}
}

// render draws the dashboard from the recording into w, and names on warn
// every panel that has no data.
func render(ctx context.Context, w io.Writer, dashboardPath, metricsPath string, warn io.Writer) (err error) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		return err
	}
	d, err := dashboard.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", dashboardPath, err)
	}
	rec, err := loadRecording(ctx, metricsPath)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rec.db.Close()) }()
	panels, err := evaluate(ctx, d, rec)
	if err != nil {
		return err
	}
	for _, p := range panels {
		if len(p.Lines) == 0 {
			fmt.Fprintf(warn, "panel %q has no data in %s\n", p.Panel.Title, metricsPath)
		}
	}
	return drawDashboard(w, d, panels)
}
