// Package version is the build's version, stamped at link time:
//
//	go build -ldflags "-X github.com/quotascale/quotascale/pkg/version.Version=v0.1.0 -X github.com/quotascale/quotascale/pkg/version.Commit=$(git rev-parse --short HEAD)"
package version

import "fmt"

// Version and Commit are set with -ldflags -X; a plain build says "dev".
var (
	Version = "dev"
	Commit  = "unknown"
)

// String is "VERSION (COMMIT)".
func String() string { return fmt.Sprintf("%s (%s)", Version, Commit) }
