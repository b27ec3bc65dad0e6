package oracle

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSharesNoCodeWithTheLibrary keeps the oracle a second opinion: were it
// to import the quota library, a bug there would be in both.
func TestSharesNoCodeWithTheLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages, too few to be the oracle's: %q", len(deps), deps)
	}
	for _, dep := range deps {
		if dep == "github.com/quotascale/quotascale/quota" || strings.HasPrefix(dep, "github.com/quotascale/quotascale/quota/") {
			t.Errorf("the oracle depends on %s", dep)
		}
	}
}
