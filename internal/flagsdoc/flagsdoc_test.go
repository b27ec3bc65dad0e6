package flagsdoc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The test binary imports what hack/flagsdoc imports, so both see the same
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
