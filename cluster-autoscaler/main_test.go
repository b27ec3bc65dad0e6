package main

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
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// binary is the cluster-autoscaler program, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cluster-autoscaler-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "cluster-autoscaler")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cluster-autoscaler:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// upstreamFlag is one line of config/testdata/upstream-flags.tsv, written from
// upstream's sources independently of the flag table.
type upstreamFlag struct {
	name, typ, def, source string
}

func upstreamFlags(t *testing.T) []upstreamFlag {
	t.Helper()
	f, err := os.Open(filepath.Join("config", "testdata", "upstream-flags.tsv"))
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

// run runs the built binary.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
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
	doc, err := os.ReadFile(filepath.Join("..", "docs", "flags.md"))
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
	_, stderr, code := runBinary(t, "--enforce-node-group-min-size", "--kubeconfig=/nonexistent")
	if code == 0 {
		t.Fatal("exited 0")
	}
	if want := "--enforce-node-group-min-size=true is not supported: node groups are only scaled up for pending pods"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not contain %q", stderr, want)
	}
}

// TestCommandLines parses command lines as the binary does.
func TestCommandLines(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		verbosity uint32
		warned    string // the one flag warned about, if any
		err       string
	}{
		// The extraArgs of upstream's chart by default.
		{name: "upstream chart defaults", args: []string{"--logtostderr=true", "--stderrthreshold=info", "--v=4"}, verbosity: 4},
		{name: "-v=4", args: []string{"-v=4"}, verbosity: 4},
		{name: "-v 4", args: []string{"-v", "4"}, verbosity: 4},
		{name: "--v 4", args: []string{"--v", "4"}, verbosity: 4},
		{name: "-v4", args: []string{"-v4"}, verbosity: 4},
		// Upstream's pflag reads a single dash as shorthands, so a long
		// flag with one dash fails there too.
		{name: "single dash long flag", args: []string{"-logtostderr"}, err: "unknown shorthand flag: 'l' in -logtostderr"},
		{name: "single dash with a value", args: []string{"-stderrthreshold=info"}, err: "unknown shorthand flag: 's' in -stderrthreshold=info"},
		{name: "underscores as upstream allows", args: []string{"--log_file_max_size=1800", "--max_nodes_total=3", "--alsologtostderr=false"}},
		{name: "klog's severity names", args: []string{"--stderrthreshold=WARNING"}, warned: "--stderrthreshold=1 has no effect"},
		{name: "a bad severity", args: []string{"--stderrthreshold=loud"},
			err: `invalid argument "loud" for "--stderrthreshold" flag: strconv.ParseInt: parsing "loud": invalid syntax`},
		{name: "a boolean with a separate value", args: []string{"--leader-elect", "false"},
			err: `unexpected arguments ["false"]: every setting is a flag`},
		{name: "unknown flag", args: []string{"--no-such-flag"}, err: "unknown flag: --no-such-flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := config.Defaults()
			cmdline := app.NewCommandLine(&opts)
			warnings, err := cmdline.Parse(tt.args)
			if tt.warned == "" && len(warnings) > 0 || tt.warned != "" && (len(warnings) != 1 || !strings.HasPrefix(warnings[0], tt.warned)) {
				t.Errorf("warnings %q, want one starting %q", warnings, tt.warned)
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.err, got); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err == nil && uint32(cmdline.Logging.Verbosity) != tt.verbosity {
				t.Errorf("verbosity %d, want %d", cmdline.Logging.Verbosity, tt.verbosity)
			}
		})
	}
}

func TestHelpIsNoError(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		opts := config.Defaults()
		cmdline := app.NewCommandLine(&opts)
		cmdline.FlagSet.SetOutput(&bytes.Buffer{})
		if _, err := cmdline.Parse([]string{arg}); !errors.Is(err, pflag.ErrHelp) {
			t.Errorf("%s: %v, want pflag.ErrHelp", arg, err)
		}
	}
}

// TestLogFile: --logtostderr=false with --log-file sends the log to that file,
// creating its directory, as upstream.
func TestLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "ca.log")
	opts := config.Defaults()
	cmdline := app.NewCommandLine(&opts)
	if _, err := cmdline.Parse([]string{"--logtostderr=false", "--log-file=" + path}); err != nil {
		t.Fatal(err)
	}
	out, err := cmdline.LoggingOptions()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(out.ErrorStream, "a line"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "a line\n" {
		t.Errorf("log file holds %q", got)
	}
	for _, args := range [][]string{{"--log-file=" + path}, {"--logtostderr=false"}} {
		cmdline := app.NewCommandLine(&opts)
		if _, err := cmdline.Parse(args); err != nil {
			t.Fatal(err)
		}
		out, err := cmdline.LoggingOptions()
		if err != nil {
			t.Fatal(err)
		}
		if out.ErrorStream != os.Stderr || out.InfoStream != os.Stderr {
			t.Errorf("%q: the log does not go to stderr", args)
		}
	}
}

func TestInterPodAffinityFastPathSetsTheGate(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.InterPodAffinityHostnameFastPath, false)
	opts := config.Defaults()
	cmdline := app.NewCommandLine(&opts)
	if _, err := cmdline.Parse([]string{"--enable-inter-pod-affinity-hostname-fast-path"}); err != nil {
		t.Fatal(err)
	}
	if !cmdline.FeatureGate.Enabled(features.InterPodAffinityHostnameFastPath) {
		t.Error("the InterPodAffinityHostnameFastPath gate is off")
	}
}
