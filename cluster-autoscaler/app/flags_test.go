package app

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

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
			cmdline := NewCommandLine(&opts)
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
		cmdline := NewCommandLine(&opts)
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
	cmdline := NewCommandLine(&opts)
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
		cmdline := NewCommandLine(&opts)
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
	cmdline := NewCommandLine(&opts)
	if _, err := cmdline.Parse([]string{"--enable-inter-pod-affinity-hostname-fast-path"}); err != nil {
		t.Fatal(err)
	}
	if !cmdline.FeatureGate.Enabled(features.InterPodAffinityHostnameFastPath) {
		t.Error("the InterPodAffinityHostnameFastPath gate is off")
	}
}
