package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/localcluster/scrape"
)

// recording scrapes the in-process autoscaler and scheduler, as Prometheus
// would, until finish writes what it kept to a file (--record-metrics).
type recording struct {
	recorder *scrape.Recorder
	path     string
	stop     context.CancelFunc
	done     chan error
}

func startRecording(ctx context.Context, autoscaler *app.Autoscaler, path string, interval time.Duration) (*recording, error) {
	if autoscaler == nil {
		return nil, errors.New("--record-metrics scrapes the in-process autoscaler; it needs --demo or --node-group-config")
	}
	ctx, stop := context.WithCancel(ctx)
	r := &recording{
		recorder: scrape.NewRecorder(func() ([]*dto.MetricFamily, error) {
			return scrape.Quotascale(autoscaler.Metrics.Registry)
		}),
		path: path,
		stop: stop,
		done: make(chan error, 1),
	}
	go func() { r.done <- r.recorder.Run(ctx, interval) }()
	return r, nil
}

// recordTailScrapes is how many scrapes a demo's recording goes on for after
// its scenarios.
const recordTailScrapes = 6

// finish records for tail longer (less if ctx ends), takes the last scrape
// and writes the recording.
func (r *recording) finish(ctx context.Context, tail time.Duration) error {
	if tail > 0 {
		fmt.Printf("\nRecording metrics for %s more...\n", tail)
		t := time.NewTimer(tail)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	r.stop()
	if err := <-r.done; err != nil {
		return fmt.Errorf("recording metrics: %w", err)
	}
	if err := r.recorder.WriteFile(r.path); err != nil {
		return fmt.Errorf("writing the recorded metrics: %w", err)
	}
	fmt.Printf("\nRecorded %d scrapes of the autoscaler's and the scheduler's metrics to %s\n", r.recorder.Scrapes(), r.path)
	return nil
}
