package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"
)

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkManifest checks a krew Plugin manifest (read as free YAML, not with the
// writer's types) against what krew's index requires, and returns its
// checksums by archive file name.
func checkManifest(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	obj := func(v any) map[string]any { o, _ := v.(map[string]any); return o }
	if got := str(m["apiVersion"]); got != "krew.googlecontainertools.github.com/v1alpha2" {
		t.Errorf("apiVersion = %q", got)
	}
	if got := str(m["kind"]); got != "Plugin" {
		t.Errorf("kind = %q", got)
	}
	name := str(obj(m["metadata"])["name"])
	if want := strings.TrimSuffix(filepath.Base(path), ".yaml"); name != want {
		t.Errorf("metadata.name = %q, want the file's name %q", name, want)
	}
	spec := obj(m["spec"])
	version := str(spec["version"])
	if !strings.HasPrefix(version, "v") || !semver.IsValid(version) {
		t.Errorf("spec.version %q is not semver with a v prefix", version)
	}
	if u, err := url.Parse(str(spec["homepage"])); err != nil || u.Scheme != "https" || u.Host == "" {
		t.Errorf("spec.homepage %q is not an https URL", spec["homepage"])
	}
	if short := str(spec["shortDescription"]); short == "" || len(short) > 50 || strings.Contains(short, "\n") {
		t.Errorf("spec.shortDescription %q must be one line of a few words", short)
	}
	platforms, _ := spec["platforms"].([]any)
	sums := map[string]string{}
	var selectors []string
	for i, raw := range platforms {
		p := obj(raw)
		labels := obj(obj(p["selector"])["matchLabels"])
		selectors = append(selectors, fmt.Sprintf("%s/%s", labels["os"], labels["arch"]))
		uri := str(p["uri"])
		if u, err := url.Parse(uri); err != nil || u.Scheme != "https" || !strings.HasSuffix(u.Path, ".tar.gz") || !strings.Contains(u.Path, "/"+version+"/") {
			t.Errorf("platforms[%d].uri %q is not an https .tar.gz of version %s", i, uri, version)
		}
		if !sha256Hex.MatchString(str(p["sha256"])) {
			t.Errorf("platforms[%d].sha256 %q is not a sha256", i, p["sha256"])
		}
		if got := str(p["bin"]); got != "kubectl-quota" {
			t.Errorf("platforms[%d].bin = %q", i, got)
		}
		sums[filepath.Base(uri)] = str(p["sha256"])
	}
	sort.Strings(selectors)
	if diff := cmp.Diff([]string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}, selectors); diff != "" {
		t.Errorf("platform selectors (-want +got):\n%s", diff)
	}
	return sums
}

// TestReleaseChecksums: the manifest's checksums are those of the archives
// written beside it, and each archive holds the binary, executable, and the
// license.
func TestReleaseChecksums(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-quota")
	license := filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(license, []byte("license"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var archives []archive
	for _, p := range platforms {
		a, err := writeArchive(out, "v1.2.3", p, bin, license)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, a)
	}
	manifest := filepath.Join(dir, "quota.yaml")
	if err := writeManifest(manifest, "v1.2.3", archives); err != nil {
		t.Fatal(err)
	}
	sums := checkManifest(t, manifest)
	if len(sums) != len(platforms) {
		t.Fatalf("%d checksums for %d platforms", len(sums), len(platforms))
	}
	for name, want := range sums {
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != want {
			t.Errorf("%s: sha256 %x, manifest says %s", name, got, want)
		}
		if diff := cmp.Diff(map[string]string{"kubectl-quota": "-rwxr-xr-x binary", "LICENSE": "-rw-r--r-- license"}, members(t, data)); diff != "" {
			t.Errorf("%s members (-want +got):\n%s", name, diff)
		}
	}
}

func members(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = hdr.FileInfo().Mode().String() + " " + string(body)
	}
}

func TestReleaseVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v0.1.0":         "v0.1.0",
		"v1.2.3-rc.1":    "v1.2.3-rc.1",
		"4ad287d":        "v0.0.0-dev+4ad287d",
		"4ad287d-dirty":  "v0.0.0-dev+4ad287d-dirty",
		"v0.1.0-3-gabc":  "v0.1.0-3-gabc",
		"":               "v0.0.0-dev",
		"weird/branch_x": "v0.0.0-dev+weird-branch-x",
	} {
		got := releaseVersion(in)
		if got != want {
			t.Errorf("releaseVersion(%q) = %q, want %q", in, got, want)
		}
		if !semver.IsValid(got) {
			t.Errorf("releaseVersion(%q) = %q is not semver", in, got)
		}
	}
}

// TestVersionPackageLinked: the package the release stamps is one kubectl-quota
// links, or the released binaries would say "dev".
func TestVersionPackageLinked(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/kubectl-quota")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !slices.Contains(strings.Fields(string(out)), versionPackage) {
		t.Errorf("kubectl-quota does not link %s, which the release stamps", versionPackage)
	}
}
