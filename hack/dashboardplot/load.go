package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/util/teststorage"
)

// recording is a recorded run loaded into a Prometheus time series database,
// with the span and the scrape interval it covers.
type recording struct {
	db         *teststorage.TestStorage
	start, end time.Time
	interval   time.Duration
}

// loadRecording reads a recording written by localcluster --record-metrics
// (Prometheus' text format, every sample with its timestamp; gzip if the
// name ends in .gz) with Prometheus' own text parser into the storage
// promql's tests evaluate against.
func loadRecording(ctx context.Context, path string) (*recording, error) {
	data, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	db, err := teststorage.NewWithError()
	if err != nil {
		return nil, err
	}
	stamps, err := appendSamples(ctx, db, data)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("loading %s: %w", path, err), db.Close())
	}
	slices.Sort(stamps)
	stamps = slices.Compact(stamps)
	if len(stamps) < 2 {
		return nil, errors.Join(fmt.Errorf("%s holds %d scrape(s); a time series needs two or more", path, len(stamps)), db.Close())
	}
	return &recording{
		db:       db,
		start:    time.UnixMilli(stamps[0]),
		end:      time.UnixMilli(stamps[len(stamps)-1]),
		interval: scrapeInterval(stamps),
	}, nil
}

// appendSamples appends every sample of the exposition to db and returns
// the timestamps seen. A sample without a timestamp is an error: a scrape
// taken without one has no place in time.
func appendSamples(ctx context.Context, db *teststorage.TestStorage, data []byte) ([]int64, error) {
	p := textparse.NewPromParser(data, labels.NewSymbolTable(), false)
	app := db.Appender(ctx)
	var stamps []int64
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.Join(err, app.Rollback())
		}
		if entry != textparse.EntrySeries {
			continue
		}
		series, ts, v := p.Series()
		if ts == nil {
			return nil, errors.Join(fmt.Errorf("sample %s has no timestamp", series), app.Rollback())
		}
		var lset labels.Labels
		p.Labels(&lset)
		if _, err := app.Append(0, lset, *ts, v); err != nil {
			return nil, errors.Join(fmt.Errorf("appending %s: %w", lset, err), app.Rollback())
		}
		stamps = append(stamps, *ts)
	}
	return stamps, app.Commit()
}

// scrapeInterval is the median gap between scrapes, to the millisecond.
func scrapeInterval(sortedStamps []int64) time.Duration {
	gaps := make([]int64, 0, len(sortedStamps)-1)
	for i := 1; i < len(sortedStamps); i++ {
		gaps = append(gaps, sortedStamps[i]-sortedStamps[i-1])
	}
	slices.Sort(gaps)
	return time.Duration(gaps[len(gaps)/2]) * time.Millisecond
}

func readMaybeGzip(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return data, err
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(gz)
}
