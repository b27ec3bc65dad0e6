// Command flagsdoc writes docs/flags.md from the binaries' flag sets, and the
// flag tables of docs/migrating-from-upstream.md from the autoscaler's flag
// table. Run it from the repository root, or through `make generate`.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	if err := os.WriteFile(Path, Render(), 0o644); err != nil {
		return err
	}
	doc, err := os.ReadFile(MigrationPath)
	if err != nil {
		return err
	}
	doc, err = RenderMigration(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(MigrationPath, doc, 0o644)
}
