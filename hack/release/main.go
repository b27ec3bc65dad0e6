// Command release builds kubectl-quota for the platforms krew serves, packs
// each build into a tar.gz archive, fills the krew plugin manifest template
// (deploy/krew/quota.yaml.tmpl) with the archives' URLs and sha256 checksums,
// and checks the manifest it wrote against the archives on disk.
//
//	go run ./hack/release -version v0.1.0 -out bin/release
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// platforms are the krew selectors archives are built for.
var platforms = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func main() {
	v := flag.String("version", "", "release version, semver with a v prefix; anything else (git describe of an untagged tree) becomes v0.0.0-dev+VALUE")
	commit := flag.String("commit", "unknown", "commit stamped into the binaries")
	out := flag.String("out", "bin/release", "directory the archives and the manifest are written to")
	tmpl := flag.String("template", "deploy/krew/quota.yaml.tmpl", "krew plugin manifest template")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	license, err := optionalFile("LICENSE")
	if err == nil && license == "" {
		fmt.Fprintln(os.Stderr, "release: warning: no LICENSE file; the archives have none, and krew-index accepts only plugins that install one")
	}
	if err == nil {
		r := release{Version: releaseVersion(*v), Out: *out, Template: *tmpl, License: license, Build: goBuild(*commit)}
		err = r.run(ctx, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// releaseVersion is v itself when krew accepts it (semver with a leading v,
// all three numbers given), and otherwise a pre-release of v0.0.0 that keeps
// v as build metadata.
func releaseVersion(v string) string {
	if strings.HasPrefix(v, "v") {
		if _, err := version.ParseSemantic(v); err == nil {
			return v
		}
	}
	meta := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.TrimPrefix(v, "v"))
	// Semver's build metadata is dot-separated identifiers, none empty.
	meta = strings.Join(strings.FieldsFunc(meta, func(r rune) bool { return r == '.' }), ".")
	if meta == "" {
		return "v0.0.0-dev"
	}
	return "v0.0.0-dev+" + meta
}

// release is one run: what it builds, where it writes, and how it builds a
// platform's binary (the Go toolchain, or a stand-in in tests).
type release struct {
	Version  string
	Out      string
	Template string
	// License is the license file packed into every archive; "" for none.
	License string
	Build   func(ctx context.Context, p platform, version, bin string) error
}

// ManifestPath is where the filled manifest goes: beside the archives, named
// as krew-index names the plugin's file.
func (r release) ManifestPath() string { return filepath.Join(r.Out, pluginName+".yaml") }

func (r release) run(ctx context.Context, log io.Writer) error {
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return err
	}
	build, err := os.MkdirTemp("", "kubectl-quota-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(build)
	var archives []archive
	for _, p := range platforms {
		bin := filepath.Join(build, p.String(), pluginBinary)
		if err := r.Build(ctx, p, r.Version, bin); err != nil {
			return err
		}
		a, err := writeArchive(r.Out, r.Version, p, bin, r.License)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "%s  %s\n", a.SHA256, a.Path)
		archives = append(archives, a)
	}
	if err := writeManifest(r.Template, r.ManifestPath(), r.Version, archives); err != nil {
		return err
	}
	if err := verifyManifest(r.ManifestPath(), r.Out); err != nil {
		return fmt.Errorf("the manifest written does not match the archives: %w", err)
	}
	fmt.Fprintln(log, "wrote", r.ManifestPath(), "and checked it against the archives")
	return nil
}

// versionPackage is where -ldflags -X stamps the version; -X on a package the
// binary does not link is silently ignored.
const versionPackage = "github.com/quotascale/quotascale/pkg/version"

// goBuild cross-compiles the plugin without cgo, with paths trimmed, so that
// the same source and toolchain give the same bytes.
func goBuild(commit string) func(ctx context.Context, p platform, version, bin string) error {
	return func(ctx context.Context, p platform, version, bin string) error {
		ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPackage, version, versionPackage, commit)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/kubectl-quota")
		cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building kubectl-quota for %s: %w", p, err)
		}
		return nil
	}
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
