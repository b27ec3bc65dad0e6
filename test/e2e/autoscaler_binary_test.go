package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

var (
	binariesMu sync.Mutex
	binaryDir  string
	// binaries are the programs built so far, by package.
	binaries = map[string]*builtBinary{}
)

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// autoscalerBinary builds the real cluster-autoscaler program once per test
// binary, as a user gets it from `make build`, and returns its path.
func autoscalerBinary(t *testing.T) string {
	t.Helper()
	return buildBinary(t, "./cluster-autoscaler", "cluster-autoscaler")
}

// buildBinary builds the program of pkg, named name, once per test binary and
// returns its path.
func buildBinary(t *testing.T, pkg, name string) string {
	t.Helper()
	binariesMu.Lock()
	b, ok := binaries[pkg]
	if !ok {
		b = &builtBinary{}
		binaries[pkg] = b
	}
	if binaryDir == "" {
		dir, err := os.MkdirTemp("", "quotascale-e2e-bin")
		if err != nil {
			binariesMu.Unlock()
			t.Fatal(err)
		}
		binaryDir = dir
	}
	dir := binaryDir
	binariesMu.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(dir, name)
		build := exec.Command("go", "build", "-o", b.path, pkg)
		build.Dir = repoRoot
		var out bytes.Buffer
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out.String())
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// removeBuiltBinaries deletes what buildBinary built; TestMain calls it.
func removeBuiltBinaries() {
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
}

// upstreamFlag is one line of config/testdata/upstream-flags.tsv, written from
// upstream's sources independently of the flag table.
type upstreamFlag struct {
	name, typ, def, source string
}

func upstreamFlags(t *testing.T) []upstreamFlag {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "cluster-autoscaler", "config", "testdata", "upstream-flags.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var flags []upstreamFlag
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 4 {
			t.Fatalf("upstream-flags.tsv: %q has %d fields, want 4", line, len(fields))
		}
		flags = append(flags, upstreamFlag{fields[0], fields[1], fields[2], fields[3]})
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return flags
}

// runBinary runs the built binary to its end.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	binary := autoscalerBinary(t)
	cmd := exec.Command(binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		exitCode = exit.ExitCode()
	default:
		t.Fatalf("running %s %q: %v", binary, args, err)
	}
	return out.String(), errOut.String(), exitCode
}

// docsRows are the rows of the cluster-autoscaler table of docs/flags.md by
// flag name: the cells of default and treatment.
func docsRows(t *testing.T) map[string][2]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	section = section[strings.Index(section, "## cluster-autoscaler"):]
	section = section[:strings.Index(section, "## kube-scheduler")]
	rows := map[string][2]string{}
	name := regexp.MustCompile("^(?:`-[a-z]`, )?`--([a-z0-9-]+)")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 4 {
			continue
		}
		if m := name.FindStringSubmatch(strings.TrimSpace(cells[0])); m != nil {
			rows[m[1]] = [2]string{cells[1], cells[2]}
		}
	}
	return rows
}

// TestEveryUpstreamFlag checks each flag of upstream's binary against the
// autoscaler's flag set (as the binary builds it and as its --help prints it),
// the flag table and docs/flags.md: registered with upstream's type, upstream's
// default unless the table declares a different one (which the docs then show),
// and the docs show the table's treatment.
func TestEveryUpstreamFlag(t *testing.T) {
	opts := config.Defaults()
	fs := app.NewCommandLine(&opts).FlagSet
	table := map[string]config.Flag{}
	for _, f := range config.Flags() {
		table[f.Name] = f
	}
	docs := docsRows(t)
	_, help, code := runBinary(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d, want 0 as upstream:\n%s", code, help)
	}
	upstream := upstreamFlags(t)
	if len(upstream) < 150 {
		t.Fatalf("upstream-flags.tsv lists %d flags; upstream has more than 150", len(upstream))
	}
	listed := map[string]bool{}
	for _, u := range upstream {
		listed[u.name] = true
		t.Run(u.name, func(t *testing.T) {
			flag := fs.Lookup(u.name)
			if flag == nil {
				t.Fatalf("--%s (%s) is not registered", u.name, u.source)
			}
			if flag.Name != u.name {
				t.Errorf("--%s is registered as --%s", u.name, flag.Name)
			}
			if got := flag.Value.Type(); got != u.typ {
				t.Errorf("--%s has type %q, upstream %q", u.name, got, u.typ)
			}
			row, ok := table[u.name]
			if !ok {
				t.Fatalf("--%s has no row in the flag table", u.name)
			}
			if row.Own {
				t.Errorf("--%s is upstream's but the table says Quotascale's own", u.name)
			}
			if row.Upstream != u.def {
				t.Errorf("--%s: the table says upstream's default is %q, upstream's is %q", u.name, row.Upstream, u.def)
			}
			wantDefault := u.def
			if row.DefaultDiffers() {
				wantDefault = row.Ours
				if !strings.Contains(docs[u.name][0], "upstream: ") {
					t.Errorf("--%s: docs/flags.md default %q does not show upstream's", u.name, docs[u.name][0])
				}
			}
			if flag.DefValue != wantDefault {
				t.Errorf("--%s has default %q, want %q (upstream's %q)", u.name, flag.DefValue, wantDefault, u.def)
			}
			cells, ok := docs[u.name]
			if !ok {
				t.Fatalf("--%s is not in docs/flags.md", u.name)
			}
			if cells[1] != row.Treatment.String() {
				t.Errorf("--%s: docs/flags.md says %q, the table %q", u.name, cells[1], row.Treatment)
			}
			if !regexp.MustCompile(`(?m)^\s+(-[a-z], )?--` + regexp.QuoteMeta(u.name) + `\b`).MatchString(help) {
				t.Errorf("--%s is not in the binary's --help", u.name)
			}
		})
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !listed[f.Name] && !table[f.Name].Own {
			t.Errorf("--%s is registered but neither upstream's nor marked as Quotascale's own", f.Name)
		}
	})
	for name, row := range table {
		if !listed[name] && !row.Own {
			t.Errorf("the table has --%s as upstream's, but upstream has no such flag", name)
		}
		if fs.Lookup(name) == nil {
			t.Errorf("the table has --%s, but it is not registered", name)
		}
	}
}

func TestUnsupportedCloudProviderExits(t *testing.T) {
	_, stderr, code := runBinary(t, "--cloud-provider=aws")
	if code == 0 {
		t.Fatalf("--cloud-provider=aws exited 0")
	}
	for _, want := range []string{`--cloud-provider "aws" is not supported`, "kwok", "clusterapi"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not contain %q", stderr, want)
		}
	}
}

// TestNoEffectWarnsOnce: a flag with no effect, set, gives one warning line
// naming it, at warning severity; the process then goes on (here to fail on
// the kubeconfig, which shows it got past the flags).
func TestNoEffectWarnsOnce(t *testing.T) {
	_, stderr, code := runBinary(t, "--regional", "--max-bulk-soft-taint-time=3s", "--kubeconfig=/nonexistent")
	if code == 0 {
		t.Fatal("exited 0 with a kubeconfig that does not exist")
	}
	var warnings []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "W") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "--regional=true has no effect") {
		t.Errorf("warnings %q, want one naming --regional (and none for a flag at upstream's default)", warnings)
	}
	if !strings.Contains(stderr, "--kubeconfig: ") {
		t.Errorf("stderr %q does not show the kubeconfig error", stderr)
	}
}

func TestRefusedFlagExits(t *testing.T) {
	_, stderr, code := runBinary(t, "--enable-provisioning-requests", "--kubeconfig=/nonexistent")
	if code == 0 {
		t.Fatal("exited 0")
	}
	if want := "--enable-provisioning-requests=true is not supported: ProvisioningRequests are not supported"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not contain %q", stderr, want)
	}
}
