// Command generate rewrites the generated files of the repository (deepcopy and
// CRDs). Run it from the repository root, or through `make generate`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quotascale/quotascale/hack/codegen"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	files, err := codegen.Generate(*root)
	if err == nil {
		err = codegen.Write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
