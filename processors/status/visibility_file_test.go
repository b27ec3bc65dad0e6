package status

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOpenVisibilityFileRotates writes past the maximum size and expects the
// full file rotated aside (whole lines only) and the rest in a new file.
func TestOpenVisibilityFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "visibility.log")
	w, err := OpenVisibilityFile(path, VisibilityFileRotation{MaxSizeMB: 1, MaxBackups: 3})
	if err != nil {
		t.Fatalf("OpenVisibilityFile: %v", err)
	}
	line := append(bytes.Repeat([]byte("x"), 1023), '\n')
	const lines = 1100 // 1100 KiB: past one megabyte
	for i := 0; i < lines; i++ {
		if _, err := w.Write(line); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rotated []string
	total := 0
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(data)%len(line) != 0 {
			t.Errorf("%s holds %d bytes, not whole lines", e.Name(), len(data))
		}
		if len(data) > 1<<20 {
			t.Errorf("%s holds %d bytes, past the maximum of 1 MiB", e.Name(), len(data))
		}
		total += len(data) / len(line)
		if e.Name() != "visibility.log" {
			rotated = append(rotated, e.Name())
		}
	}
	if len(rotated) != 1 {
		t.Errorf("rotated files = %v, want one", rotated)
	}
	if total != lines {
		t.Errorf("lines in all files = %d, want %d", total, lines)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o644 {
		t.Errorf("mode of %s = %v, want 0644", path, got)
	}
}

// TestOpenVisibilityFileErrors: a path that cannot be created is reported at
// once, not on the first decision.
func TestOpenVisibilityFileErrors(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{name: "parent is a file", path: filepath.Join(notADir, "visibility.log")},
		{name: "path is a directory", path: dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := OpenVisibilityFile(tt.path, VisibilityFileRotation{MaxSizeMB: 1}); err == nil {
				t.Errorf("OpenVisibilityFile(%q) succeeded, want an error", tt.path)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"file"}, names); diff != "" {
		t.Errorf("files left behind (-want +got):\n%s", diff)
	}
}
