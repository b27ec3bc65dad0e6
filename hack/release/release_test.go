package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/version"
	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"
)

// The rules below are those krew applies to a plugin manifest: the index's
// structural validation (ValidatePlugin in krew's internal/index/validation)
// and what its validate-krew-manifest command adds for krew-index (the file
// named after the plugin, every selector matching a platform krew runs on, no
// two selectors matching the same one, a license among the installed files).
// They read the manifest as free YAML, not with hack/release's types.

var (
	krewSHA256     = regexp.MustCompile(`^[a-f0-9]{64}$`)
	krewPluginName = regexp.MustCompile(`^[\w-]+$`)
	// krewPlatforms are the os/arch pairs krew's manifest validation knows.
	krewPlatforms = []string{"windows/386", "windows/amd64", "windows/arm64", "linux/386", "linux/amd64", "linux/arm",
		"linux/arm64", "linux/ppc64le", "darwin/386", "darwin/amd64", "darwin/arm64"}
	// windowsReserved are file names Windows forbids, which krew refuses as plugin names.
	windowsReserved = []string{"con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
		"com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9"}
	licenseNames = []string{"license", "license.txt", "license.md", "licenses", "licenses.txt", "licenses.md", "copying", "copying.txt"}
)

// krewVersionProblem is krew's version rule: a leading v, then semver.
func krewVersionProblem(v string) string {
	if v == "" {
		return "spec.version is missing"
	}
	if !strings.HasPrefix(v, "v") {
		return fmt.Sprintf("spec.version %q does not start with v", v)
	}
	if _, err := version.ParseSemantic(v); err != nil {
		return fmt.Sprintf("spec.version %q: %v", v, err)
	}
	return ""
}

// checkManifest lists every way the manifest file breaks krew's rules.
func checkManifest(file string, data []byte) []string {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if got := str(m["apiVersion"]); got != "krew.googlecontainertools.github.com/v1alpha2" {
		bad("apiVersion %q is not krew's", got)
	}
	if got := str(m["kind"]); got != "Plugin" {
		bad("kind %q is not Plugin", got)
	}
	name, ext := strings.TrimSuffix(filepath.Base(file), ".yaml"), filepath.Ext(file)
	if ext != ".yaml" {
		bad("file %s does not end in .yaml", file)
	}
	if !krewPluginName.MatchString(name) || slices.Contains(windowsReserved, strings.ToLower(name)) {
		bad("plugin name %q is not allowed", name)
	}
	if got := str(obj(m["metadata"])["name"]); got != name {
		bad("metadata.name %q is not the file's name %q", got, name)
	}
	spec := obj(m["spec"])
	if short := str(spec["shortDescription"]); short == "" || strings.ContainsAny(short, "\r\n") {
		bad("spec.shortDescription %q must be one non-empty line", short)
	}
	if p := krewVersionProblem(str(spec["version"])); p != "" {
		bad("%s", p)
	}
	platforms, _ := spec["platforms"].([]any)
	if len(platforms) == 0 {
		bad("spec.platforms is empty")
	}
	matched := map[string][]int{}
	for i, raw := range platforms {
		for _, p := range checkPlatform(obj(raw)) {
			bad("spec.platforms[%d]: %s", i, p)
		}
		for _, osArch := range selected(obj(obj(raw)["selector"])) {
			matched[osArch] = append(matched[osArch], i)
		}
		if len(selected(obj(obj(raw)["selector"]))) == 0 {
			bad("spec.platforms[%d]: its selector matches no platform krew runs on", i)
		}
	}
	for _, osArch := range krewPlatforms {
		if len(matched[osArch]) > 1 {
			bad("spec.platforms %v all select %s", matched[osArch], osArch)
		}
	}
	return problems
}

// checkPlatform is krew's rule for one platform entry.
func checkPlatform(p map[string]any) []string {
	var problems []string
	if str(p["uri"]) == "" {
		problems = append(problems, "uri is missing")
	}
	if sum := str(p["sha256"]); !krewSHA256.MatchString(sum) {
		problems = append(problems, fmt.Sprintf("sha256 %q is not 64 lowercase hex digits", sum))
	}
	if str(p["bin"]) == "" {
		problems = append(problems, "bin is missing")
	}
	// files may be left out (krew then copies everything), but not empty.
	if files, set := p["files"]; set {
		list, _ := files.([]any)
		if len(list) == 0 {
			problems = append(problems, "files is empty")
		}
		for j, f := range list {
			if str(obj(f)["from"]) == "" || str(obj(f)["to"]) == "" {
				problems = append(problems, fmt.Sprintf("files[%d] needs both from and to", j))
			}
		}
	}
	sel, ok := p["selector"].(map[string]any)
	if !ok {
		return append(problems, "selector is missing")
	}
	labels, hasLabels := sel["matchLabels"].(map[string]any)
	exprs, hasExprs := sel["matchExpressions"].([]any)
	if !hasLabels && len(exprs) == 0 {
		problems = append(problems, "selector is empty")
	}
	if hasLabels && len(labels) == 0 {
		problems = append(problems, "selector.matchLabels is empty")
	}
	if hasExprs && len(exprs) == 0 {
		problems = append(problems, "selector.matchExpressions is empty")
	}
	var keys []string
	for k := range labels {
		keys = append(keys, k)
	}
	for _, e := range exprs {
		keys = append(keys, str(obj(e)["key"]))
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "os" && k != "arch" {
			problems = append(problems, fmt.Sprintf("selector key %q is neither os nor arch", k))
		}
	}
	return problems
}

// selected lists the os/arch pairs krew runs on that a matchLabels selector
// selects (the manifests here use no matchExpressions).
func selected(sel map[string]any) []string {
	labels := obj(sel["matchLabels"])
	if len(labels) == 0 {
		return nil
	}
	var out []string
	for _, osArch := range krewPlatforms {
		osName, arch, _ := strings.Cut(osArch, "/")
		if (labels["os"] == nil || str(labels["os"]) == osName) && (labels["arch"] == nil || str(labels["arch"]) == arch) {
			out = append(out, osArch)
		}
	}
	return out
}

func str(v any) string             { s, _ := v.(string); return s }
func obj(v any) map[string]any     { o, _ := v.(map[string]any); return o }
func list(v any) []any             { l, _ := v.([]any); return l }
func standIn(p platform) []byte    { return []byte("kubectl-quota stand-in for " + p.String()) }
func sha256Hex(data []byte) string { s := sha256.Sum256(data); return hex.EncodeToString(s[:]) }

// runStandIn runs the release as `make release` does, on the committed
// template, with a stand-in binary per platform in place of a cross-compiled
// kubectl-quota (four of those cost minutes), and a license file.
func runStandIn(t *testing.T, v string) release {
	t.Helper()
	dir := t.TempDir()
	license := filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(license, []byte("license text"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := release{
		Version: v, Out: filepath.Join(dir, "release"), Template: "../../deploy/krew/quota.yaml.tmpl", License: license,
		Build: func(_ context.Context, p platform, _ string, bin string) error {
			if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
				return err
			}
			return os.WriteFile(bin, standIn(p), 0o755)
		},
	}
	if err := r.run(context.Background(), io.Discard); err != nil {
		t.Fatalf("release: %v", err)
	}
	return r
}

// TestReleaseManifest: the manifest `make release` writes passes krew's rules,
// names one archive per platform krew selects by os and arch, and each
// archive beside it has the manifest's sha256 and holds that platform's
// binary, executable, and the license.
func TestReleaseManifest(t *testing.T) {
	r := runStandIn(t, "v1.2.3")
	data, err := os.ReadFile(r.ManifestPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkManifest(r.ManifestPath(), data) {
		t.Error(p)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if got := str(obj(m["spec"])["version"]); got != "v1.2.3" {
		t.Errorf("spec.version = %q, want v1.2.3", got)
	}
	var selectors []string
	for _, raw := range list(obj(m["spec"])["platforms"]) {
		p := obj(raw)
		labels := obj(obj(p["selector"])["matchLabels"])
		osArch := platform{str(labels["os"]), str(labels["arch"])}
		selectors = append(selectors, osArch.String())
		u, err := url.Parse(str(p["uri"]))
		if err != nil || u.Scheme != "https" || !strings.Contains(u.Path, "/releases/download/v1.2.3/") {
			t.Errorf("%s: uri %q is not a download of release v1.2.3", osArch, p["uri"])
			continue
		}
		content, err := os.ReadFile(filepath.Join(r.Out, path.Base(u.Path)))
		if err != nil {
			t.Errorf("%s: %v", osArch, err)
			continue
		}
		if got := sha256Hex(content); got != str(p["sha256"]) {
			t.Errorf("%s: archive sha256 %s, manifest %s", osArch, got, p["sha256"])
		}
		want := map[string]string{"kubectl-quota": "-rwxr-xr-x " + string(standIn(osArch)), "LICENSE": "-rw-r--r-- license text"}
		if diff := cmp.Diff(want, members(t, content)); diff != "" {
			t.Errorf("%s: archive members (-want +got):\n%s", osArch, diff)
		}
		var installed []string
		for _, f := range list(p["files"]) {
			installed = append(installed, strings.ToLower(str(obj(f)["from"])))
		}
		if !slices.ContainsFunc(installed, func(f string) bool { return slices.Contains(licenseNames, f) }) {
			t.Errorf("%s: installs %v, no license file, which krew-index requires", osArch, installed)
		}
	}
	sort.Strings(selectors)
	if diff := cmp.Diff([]string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"}, selectors); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}

// TestReleaseChecksOwnOutput: the release's own check of the manifest against
// the archives fails when an archive is not the one the manifest describes.
func TestReleaseChecksOwnOutput(t *testing.T) {
	r := runStandIn(t, "v1.2.3")
	if err := verifyManifest(r.ManifestPath(), r.Out); err != nil {
		t.Fatalf("a fresh release: %v", err)
	}
	name := filepath.Join(r.Out, archiveName("v1.2.3", platform{"darwin", "arm64"}))
	other, err := writeArchive(t.TempDir(), "v1.2.3", platform{"darwin", "arm64"}, r.ManifestPath(), "")
	if err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(other.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	err = verifyManifest(r.ManifestPath(), r.Out)
	if err == nil || !strings.Contains(err.Error(), "the manifest says") || !strings.Contains(err.Error(), "has no LICENSE") {
		t.Errorf("verifyManifest after replacing %s = %v, want a checksum and a missing license", name, err)
	}
}

// TestCheckManifestCatches: each of krew's rules rejects a manifest that breaks it.
func TestCheckManifestCatches(t *testing.T) {
	r := runStandIn(t, "v1.2.3")
	good, err := os.ReadFile(r.ManifestPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		edit       func(m map[string]any)
		want       string
	}{
		{"apiVersion", "quota.yaml", func(m map[string]any) { m["apiVersion"] = "krew.googlecontainertools.github.com/v1alpha1" }, "apiVersion"},
		{"kind", "quota.yaml", func(m map[string]any) { m["kind"] = "Plugins" }, "kind"},
		{"name", "quota.yaml", func(m map[string]any) { obj(m["metadata"])["name"] = "quotas" }, "metadata.name"},
		{"file name", "kubectl quota.yaml", func(m map[string]any) { obj(m["metadata"])["name"] = "kubectl quota" }, "plugin name"},
		{"reserved name", "nul.yaml", func(m map[string]any) { obj(m["metadata"])["name"] = "nul" }, "plugin name"},
		{"short description", "quota.yaml", func(m map[string]any) { obj(m["spec"])["shortDescription"] = "two\nlines" }, "shortDescription"},
		{"version without v", "quota.yaml", func(m map[string]any) { obj(m["spec"])["version"] = "1.2.3" }, "does not start with v"},
		{"version not semver", "quota.yaml", func(m map[string]any) { obj(m["spec"])["version"] = "v1.2" }, `spec.version "v1.2"`},
		{"no platforms", "quota.yaml", func(m map[string]any) { delete(obj(m["spec"]), "platforms") }, "platforms is empty"},
		{"uri", "quota.yaml", func(m map[string]any) { delete(platformOf(m, 0), "uri") }, "uri is missing"},
		{"sha256", "quota.yaml", func(m map[string]any) { platformOf(m, 1)["sha256"] = strings.ToUpper(str(platformOf(m, 1)["sha256"])) }, "sha256"},
		{"bin", "quota.yaml", func(m map[string]any) { platformOf(m, 2)["bin"] = "" }, "bin is missing"},
		{"empty files", "quota.yaml", func(m map[string]any) { platformOf(m, 0)["files"] = []any{} }, "files is empty"},
		{"file without to", "quota.yaml", func(m map[string]any) { delete(obj(list(platformOf(m, 0)["files"])[0]), "to") }, "needs both from and to"},
		{"no selector", "quota.yaml", func(m map[string]any) { delete(platformOf(m, 3), "selector") }, "selector is missing"},
		{"empty matchLabels", "quota.yaml", func(m map[string]any) { platformOf(m, 3)["selector"] = map[string]any{"matchLabels": map[string]any{}} }, "matchLabels is empty"},
		{"selector key", "quota.yaml", func(m map[string]any) { obj(obj(platformOf(m, 0)["selector"])["matchLabels"])["distro"] = "debian" }, `"distro"`},
		{"unknown platform", "quota.yaml", func(m map[string]any) { obj(obj(platformOf(m, 0)["selector"])["matchLabels"])["arch"] = "s390x" }, "matches no platform"},
		{"overlap", "quota.yaml", func(m map[string]any) { delete(obj(obj(platformOf(m, 0)["selector"])["matchLabels"]), "arch") }, "all select"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := yaml.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			tc.edit(m)
			data, err := yaml.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			problems := checkManifest(tc.file, data)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q, want one naming %q", problems, tc.want)
			}
		})
	}
}

func platformOf(m map[string]any, i int) map[string]any {
	return obj(list(obj(m["spec"])["platforms"])[i])
}

func members(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
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
		"v1.2":           "v0.0.0-dev+1.2",
		"1.2.3":          "v0.0.0-dev+1.2.3",
		"":               "v0.0.0-dev",
		"weird/branch_x": "v0.0.0-dev+weird-branch-x",
		"a..b.":          "v0.0.0-dev+a.b",
	} {
		if got := releaseVersion(in); got != want {
			t.Errorf("releaseVersion(%q) = %q, want %q", in, got, want)
		}
	}
	// Whatever git describe says, krew accepts the version released.
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.String().Draw(t, "version")
		if p := krewVersionProblem(releaseVersion(in)); p != "" {
			t.Fatalf("releaseVersion(%q): %s", in, p)
		}
	})
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
