package localcluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// localUpOwnedFlags point the autoscaler at local-up's control plane and node
// groups. local-up sets them (or leaves them unset); a user's flag may repeat
// local-up's value but not change it, since the autoscaler would then look for
// a cluster or node groups that are not there.
var localUpOwnedFlags = []string{
	"cloud-config", "cloud-provider", "clusterapi-cloud-config-authoritative", "elastic-quota-scheduler-names",
	"kubeconfig", "kubernetes", "kwok-state-configmap", "node-group-auto-discovery",
}

// processWideFlags change state the whole process shares: in process, the
// control plane's feature gates would change with the autoscaler's.
var processWideFlags = []string{"enable-inter-pod-affinity-hostname-fast-path", "feature-gates"}

// autoscalerArgs are the cluster autoscaler's command line as local-up runs
// it: local-up's defaults, its owned flags, and the user's flags last.
type autoscalerArgs struct {
	// defaults are local-up's choices that the user's flags may override.
	defaults []string
	// owned set localUpOwnedFlags; an owned flag not among them stays unset.
	owned []string
	user  []string
	// inProcess: the autoscaler runs in this process rather than as the binary.
	inProcess bool
}

// parsedArgs are the autoscaler's options and the same command line written
// out for the binary.
type parsedArgs struct {
	opts config.Options
	// args are every flag set, as --name=value, sorted by name; upstreamArgs
	// leave out Quotascale's own flags.
	args, upstreamArgs []string
	changed            map[string]bool
	warnings           []string
}

// parse parses the command line with the autoscaler's own (app.CommandLine):
// the same flags, types, refusals, warnings and validation as the binary. It
// leaves the process as it was: klog's settings are restored and the feature
// gates are parsed into a copy.
func (a autoscalerArgs) parse() (*parsedArgs, error) {
	defer klog.CaptureState().Restore()
	want, err := ownedValues(a.owned)
	if err != nil {
		return nil, err
	}
	p := &parsedArgs{opts: config.Defaults(), changed: map[string]bool{}}
	cmdline := privateCommandLine(&p.opts)
	warnings, err := cmdline.Parse(slices.Concat(a.defaults, a.owned, a.user))
	if errors.Is(err, pflag.ErrHelp) {
		return nil, err
	}
	var problems []string
	if cmdline.FlagSet.Parsed() {
		// Before the validation's errors, which a changed owned flag causes.
		for _, name := range localUpOwnedFlags {
			if got := cmdline.FlagSet.Lookup(name); got.Value.String() != want[name].Value.String() {
				problems = append(problems, fmt.Sprintf("%s: local-up points the autoscaler at its own cluster and node groups with %s; leave the flag out",
					strings.Join(flagArgs(got), " "), describe(want[name])))
			}
		}
	}
	if err != nil && len(problems) == 0 {
		return nil, fmt.Errorf("cluster-autoscaler flags: %w", err)
	}
	if *cmdline.ShowVersion {
		return nil, errors.New("cluster-autoscaler flags: --version is for the binary itself; run bin/cluster-autoscaler --version")
	}
	cmdline.FlagSet.Visit(func(f *pflag.Flag) {
		if !f.Changed {
			return // set by the flag table to upstream's default, not on the command line
		}
		p.changed[f.Name] = true
		arg := flagArgs(f)
		p.args = append(p.args, arg...)
		if row := tableRow(f.Name); row == nil || !row.Own {
			p.upstreamArgs = append(p.upstreamArgs, arg...)
		}
		if a.inProcess && slices.Contains(processWideFlags, f.Name) {
			problems = append(problems, fmt.Sprintf("--%s: the in-process autoscaler shares the control plane's feature gates; "+
				"pass it to the cluster-autoscaler binary (--autoscaler=false)", f.Name))
		}
		if row := tableRow(f.Name); a.inProcess && row != nil && (row.By == config.ByKlog || row.By == config.ByLogsAPI) {
			warnings = append(warnings, fmt.Sprintf("--%s applies to the cluster-autoscaler binary only; "+
				"the in-process autoscaler logs with the control plane, to its log file", f.Name))
		}
	})
	if a.inProcess && p.opts.LeaderElect {
		warnings = append(warnings, "--leader-elect=true applies to the cluster-autoscaler binary only; the in-process autoscaler runs alone, without a lease")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("cluster-autoscaler flags: %s", strings.Join(problems, "; "))
	}
	p.warnings = warnings
	return p, nil
}

// privateCommandLine is the autoscaler's command line with a copy of the
// process's feature gates, so that parsing --feature-gates changes nothing
// else in the process.
func privateCommandLine(opts *config.Options) *app.CommandLine {
	cmdline := app.NewCommandLine(opts)
	gate := cmdline.FeatureGate.DeepCopy()
	cmdline.FeatureGate = gate
	cmdline.FlagSet.Lookup("feature-gates").Value = gate.(pflag.Value)
	return cmdline
}

// ownedValues are localUpOwnedFlags with only owned parsed.
func ownedValues(owned []string) (map[string]*pflag.Flag, error) {
	opts := config.Defaults()
	fs := privateCommandLine(&opts).FlagSet
	if err := fs.Parse(owned); err != nil {
		return nil, fmt.Errorf("local-up's own cluster-autoscaler flags %q: %w", owned, err)
	}
	values := map[string]*pflag.Flag{}
	for _, name := range localUpOwnedFlags {
		values[name] = fs.Lookup(name)
	}
	return values, nil
}

// describe is a flag as set, or says that it is not.
func describe(f *pflag.Flag) string {
	if !f.Changed {
		return "--" + f.Name + " unset"
	}
	return strings.Join(flagArgs(f), " ")
}

// flagArgs write a parsed flag's value back as arguments that parse to it:
// one --name=value per element of a string array, the comma-separated form
// (quoted as pflag reads it) of a string slice.
func flagArgs(f *pflag.Flag) []string {
	if v, ok := f.Value.(pflag.SliceValue); ok && f.Value.Type() == "stringArray" {
		var args []string
		for _, s := range v.GetSlice() {
			args = append(args, "--"+f.Name+"="+s)
		}
		return args
	}
	value := f.Value.String()
	if f.Value.Type() == "stringSlice" {
		value = strings.TrimSuffix(strings.TrimPrefix(value, "["), "]")
	}
	return []string{"--" + f.Name + "=" + value}
}

func tableRow(name string) *config.Flag {
	for _, f := range config.Flags() {
		if f.Name == name {
			return &f
		}
	}
	return nil
}
