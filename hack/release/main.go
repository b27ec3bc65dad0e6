// Command release builds kubectl-quota for the platforms krew serves, packs
// each build into a tar.gz archive, and writes the krew plugin manifest
// (deploy/krew/quota.yaml) with the archives' URLs and sha256 checksums.
//
//	go run ./hack/release -version v0.1.0 -out bin/release -manifest deploy/krew/quota.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
)

// platforms are the krew selectors archives are built for.
var platforms = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func main() {
	version := flag.String("version", "", "release version, semver with a v prefix; anything else (git describe of an untagged tree) becomes v0.0.0-dev+VALUE")
	commit := flag.String("commit", "unknown", "commit stamped into the binaries")
	out := flag.String("out", "bin/release", "directory the archives are written to")
	manifest := flag.String("manifest", "deploy/krew/quota.yaml", "krew plugin manifest to write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, releaseVersion(*version), *commit, *out, *manifest); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// releaseVersion is v itself when krew accepts it, and otherwise a
// pre-release of v0.0.0 that keeps v as build metadata.
func releaseVersion(v string) string {
	if semver.IsValid(v) {
		return v
	}
	meta := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.TrimPrefix(v, "v"))
	if meta == "" {
		return "v0.0.0-dev"
	}
	return "v0.0.0-dev+" + meta
}

func run(ctx context.Context, version, commit, out, manifestPath string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	build, err := os.MkdirTemp("", "kubectl-quota-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(build)
	license, err := optionalFile("LICENSE")
	if err != nil {
		return err
	}
	var archives []archive
	for _, p := range platforms {
		bin := filepath.Join(build, p.String(), pluginBinary)
		if err := goBuild(ctx, p, version, commit, bin); err != nil {
			return err
		}
		a, err := writeArchive(out, version, p, bin, license)
		if err != nil {
			return err
		}
		fmt.Printf("%s  %s\n", a.SHA256, a.Path)
		archives = append(archives, a)
	}
	if err := writeManifest(manifestPath, version, archives); err != nil {
		return err
	}
	fmt.Println("wrote", manifestPath)
	return nil
}

// versionPackage is where -ldflags -X stamps the version; -X on a package the
// binary does not link is silently ignored.
const versionPackage = "github.com/quotascale/quotascale/pkg/version"

// goBuild cross-compiles the plugin without cgo, with paths trimmed, so that
// the same source and toolchain give the same bytes.
func goBuild(ctx context.Context, p platform, version, commit, bin string) error {
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPackage, version, versionPackage, commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/kubectl-quota")
	cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building kubectl-quota for %s: %w", p, err)
	}
	return nil
}

// optionalFile is the path of name when the repository has it, else "".
func optionalFile(name string) (string, error) {
	_, err := os.Stat(name)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return name, nil
}
