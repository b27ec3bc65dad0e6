package status

import (
	"fmt"
	"io"
	"os"

	"gopkg.in/natefinch/lumberjack.v2"
)

// VisibilityFileRotation bounds the disk the visibility log's file takes: a
// file written for months would otherwise fill the volume it is on.
type VisibilityFileRotation struct {
	// MaxSizeMB is the size in megabytes at which the file is rotated.
	MaxSizeMB int
	// MaxBackups and MaxAgeDays bound the rotated files kept, by count and by
	// days since rotation; 0 is no bound.
	MaxBackups int
	MaxAgeDays int
	// Compress gzips rotated files.
	Compress bool
}

// OpenVisibilityFile returns a writer that appends to path and rotates it as r
// says. Rotated files are named after path with the UTC time of rotation.
func OpenVisibilityFile(path string, r VisibilityFileRotation) (io.WriteCloser, error) {
	// lumberjack opens the file only on the first write and creates it 0600;
	// creating it here reports a bad path at start instead of on the first
	// decision, and keeps it readable by a log shipper running as another
	// user, as the file was before rotation: lumberjack gives the files it
	// rotates to the mode of the file they replace.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the visibility log: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("opening the visibility log: %w", err)
	}
	return &lumberjack.Logger{
		Filename:   path,
		MaxSize:    r.MaxSizeMB,
		MaxBackups: r.MaxBackups,
		MaxAge:     r.MaxAgeDays,
		Compress:   r.Compress,
	}, nil
}
