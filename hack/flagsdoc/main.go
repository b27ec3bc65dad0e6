// Command flagsdoc writes docs/flags.md from the binaries' flag sets. Run it
// from the repository root, or through `make generate`.
package main

import (
	"fmt"
	"os"

	"github.com/quotascale/quotascale/internal/flagsdoc"
)

func main() {
	if err := os.WriteFile(flagsdoc.Path, flagsdoc.Render(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
