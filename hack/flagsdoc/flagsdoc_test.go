package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The test binary is the command's own package, so both see the same
// registered feature gates and global flags.
func TestReferenceUpToDate(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", "..", Path))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(Render()), string(got)); diff != "" {
		t.Errorf("%s is stale; run make generate (-generated +file):\n%s", Path, diff)
	}
}

func TestMigrationGuideUpToDate(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", "..", MigrationPath))
	if err != nil {
		t.Fatal(err)
	}
	want, err := RenderMigration(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("the flag tables of %s are stale; run make generate (-generated +file):\n%s", MigrationPath, diff)
	}
}

func TestRenderMigrationNeedsMarkers(t *testing.T) {
	for _, doc := range []string{"no markers", endFlags + beginFlags} {
		if _, err := RenderMigration([]byte(doc)); err == nil {
			t.Errorf("RenderMigration(%q) = nil error, want one naming the markers", doc)
		}
	}
}
