package app

import (
	"errors"
	goflag "flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

func init() {
	// Before anything can close the gate by adding it to a flag set, as
	// upstream's main does; adding the same specs twice is allowed.
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// CommandLine is cluster-autoscaler's command line, made from the flag table
// of package config: upstream's flags and Quotascale's own, klog's flags as
// upstream's main merges them, component-base logging, the feature gate and
// --version. The binary parses it and the flags reference (docs/flags.md) is
// generated from it, so the two cannot drift apart.
type CommandLine struct {
	FlagSet     *pflag.FlagSet
	Logging     *logsapi.LoggingConfiguration
	FeatureGate featuregate.MutableFeatureGate
	ShowVersion *bool
	opts        *config.Options
}

// NewCommandLine binds the flags to opts, whose values are the defaults.
func NewCommandLine(opts *config.Options) *CommandLine {
	fs := pflag.NewFlagSet(Component, pflag.ContinueOnError)
	// As upstream (component-base's cli/flag.InitFlags): --log_file and
	// --log-file, --max_nodes_total and --max-nodes-total are the same flag.
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	opts.AddFlags(fs)
	logging := logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(logging, fs)
	gate := utilfeature.DefaultMutableFeatureGate
	// The gate is its own flag value. Registering it this way, rather than with
	// gate.AddFlag, leaves it open for other components in the same process.
	fs.Var(gate.(pflag.Value), "feature-gates", "")
	// Upstream's default is no override; an earlier parse in this process does
	// not change that.
	fs.Lookup("feature-gates").DefValue = ""
	showVersion := fs.Bool("version", false, "")
	fs.AddGoFlagSet(klogFlags())
	for _, f := range config.Flags() {
		if flag := fs.Lookup(f.Name); flag != nil {
			flag.Usage = f.Usage
		}
	}
	return &CommandLine{FlagSet: fs, Logging: logging, FeatureGate: gate, ShowVersion: showVersion, opts: opts}
}

// klogFlags are klog's flags. Their values are klog's own, so setting one acts
// exactly as it does upstream. They are reset to the defaults of the flag table
// first: klog's state is process-wide, and the table has the two defaults
// upstream's main changes (--stderrthreshold is INFO, and honoured with
// --logtostderr). -v and --vmodule are component-base's, registered before, so
// klog's are left out by AddGoFlagSet.
func klogFlags() *goflag.FlagSet {
	fs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(fs)
	for _, f := range config.Flags() {
		if f.By != config.ByKlog {
			continue
		}
		value := f.Upstream
		if f.Type == "traceLocation" {
			value = "" // klog prints an unset location as ":0" but sets it from ""
		}
		utilruntime.Must(fs.Set(strings.ReplaceAll(f.Name, "-", "_"), value))
	}
	return fs
}

// Parse parses args. Unless --version is given, it then refuses flags set to
// what Quotascale cannot do and invalid options, and returns a warning for
// each flag set to a value that has no effect here. pflag.ErrHelp means the
// usage was printed for --help.
func (c *CommandLine) Parse(args []string) (warnings []string, err error) {
	if err := c.FlagSet.Parse(args); err != nil {
		return nil, err
	}
	if *c.ShowVersion {
		return nil, nil
	}
	if args := c.FlagSet.Args(); len(args) > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: every setting is a flag", args)
	}
	warnings, err = config.CheckFlags(c.FlagSet)
	// Both kinds of problem at once, so that one restart shows them all.
	if err := errors.Join(err, c.opts.Validate()); err != nil {
		return warnings, err
	}
	// As upstream: the plugins log up to --scheduler-verbosity, which is at
	// most -v.
	if v := int(c.Logging.Verbosity); c.opts.SchedulerVerbosity > v {
		warnings = append(warnings, fmt.Sprintf("--scheduler-verbosity=%d is above -v=%d; using %d", c.opts.SchedulerVerbosity, v, v))
		c.opts.SchedulerVerbosity = v
	}
	c.opts.SchedulerLogOffset = int(c.Logging.Verbosity) - c.opts.SchedulerVerbosity
	if c.FlagSet.Changed("enable-inter-pod-affinity-hostname-fast-path") {
		err := c.FeatureGate.SetFromMap(map[string]bool{string(features.InterPodAffinityHostnameFastPath): c.opts.InterPodAffinityHostnameFastPath})
		if err != nil {
			return warnings, fmt.Errorf("--enable-inter-pod-affinity-hostname-fast-path: %w", err)
		}
	}
	return warnings, nil
}

// LoggingOptions are where the log goes, from klog's flags as upstream
// computes them: stderr, unless --log-file is set and --logtostderr is false;
// then the file (its directory created), and stderr too with
// --alsologtostderr.
func (c *CommandLine) LoggingOptions() (*logsapi.LoggingOptions, error) {
	logFile := c.FlagSet.Lookup("log-file").Value.String()
	toStderr, err := c.FlagSet.GetBool("logtostderr")
	if err != nil {
		return nil, err
	}
	alsoToStderr, err := c.FlagSet.GetBool("alsologtostderr")
	if err != nil {
		return nil, err
	}
	var out io.Writer = os.Stderr
	if logFile != "" && !toStderr {
		if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
			return nil, fmt.Errorf("--log-file: %w", err)
		}
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--log-file: %w", err)
		}
		out = f
		if alsoToStderr {
			out = io.MultiWriter(f, os.Stderr)
		}
	}
	return &logsapi.LoggingOptions{ErrorStream: out, InfoStream: out}, nil
}
