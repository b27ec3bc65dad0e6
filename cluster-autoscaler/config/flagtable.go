package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Treatment is what Quotascale does with one of upstream's flags.
type Treatment int

const (
	// Implemented flags do what upstream's do.
	Implemented Treatment = iota
	// NoEffect flags are accepted with any value of their type, because no
	// value changes anything Quotascale does (tuning for a provider or a feature
	// it does not have, or something upstream's binary ignores as well). A value
	// other than upstream's default gets one start-up warning naming the flag.
	NoEffect
	// Refused flags are accepted at upstream's default; any other value asks
	// for behaviour Quotascale does not have, and the process stops with
	// Flag.Why.
	Refused
)

func (t Treatment) String() string {
	switch t {
	case Implemented:
		return "implemented"
	case NoEffect:
		return "no effect"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Treatment(%d)", int(t))
}

// Registrar says who registers a flag on the command line.
type Registrar int

const (
	// ByTable: AddFlags registers the flag from its row.
	ByTable Registrar = iota
	// ByKlog: klog's own flag, registered by klog.InitFlags as upstream does.
	ByKlog
	// ByLogsAPI: component-base's logging configuration (logsapi.AddFlags).
	ByLogsAPI
	// ByFeatureGate: the process-wide feature gate's --feature-gates.
	ByFeatureGate
	// ByCommandLine: app.NewCommandLine itself (--version).
	ByCommandLine
)

// Flag is one row of the command line's table: every flag of upstream's
// cluster-autoscaler binary, and Quotascale's own. The binary's flag set, the
// start-up checks and docs/flags.md are all made from these rows.
type Flag struct {
	Name string
	// Type is the pflag type name, as upstream's binary registers the flag.
	Type string
	// Upstream is upstream's default as its flag set prints it; empty for
	// Quotascale's own flags.
	Upstream string
	// Ours is set only where Quotascale's default differs from Upstream; the
	// migration guide lists every such flag.
	Ours      string
	Treatment Treatment
	// Own marks a flag upstream's binary does not have.
	Own bool
	// Usage is the help text.
	Usage string
	// Why explains a treatment other than Implemented (and any difference of an
	// implemented flag): what Quotascale does instead, or what to use.
	Why string
	// Issue is the issue that is to implement the flag, when one is planned.
	Issue int
	// By registers the flag; ByTable rows that are Implemented have a Field.
	By Registrar
	// Field points at the option an implemented flag writes: *string, *bool,
	// *int, *float64, *time.Duration, *[]string or a pflag.Value.
	Field func(o *Options) any
}

// Default is the default the autoscaler runs with.
func (f *Flag) Default() string {
	if f.Ours != "" {
		return f.Ours
	}
	return f.Upstream
}

// DefaultDiffers reports whether the default differs from upstream's.
func (f *Flag) DefaultDiffers() bool { return !f.Own && f.Ours != "" && f.Ours != f.Upstream }

// Flags is the table, sorted by name.
func Flags() []Flag {
	all := slices.Concat(generalFlags, scaleUpFlags, scaleDownFlags, healthFlags, providerFlags, loggingFlags, quotascaleFlags)
	slices.SortFunc(all, func(a, b Flag) int { return strings.Compare(a.Name, b.Name) })
	return all
}

// AddFlags registers on fs every row that the table registers itself, writing
// implemented flags into o (whose values are the defaults). Rows registered by
// klog, logsapi or the feature gate are registered by the caller
// (app.NewCommandLine) through those libraries, as upstream's main does.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	for _, f := range Flags() {
		if f.By != ByTable {
			continue
		}
		if f.Field != nil {
			bindField(fs, &f, f.Field(o))
			continue
		}
		placeholder(fs, &f)
	}
}

// bindField registers an implemented flag on the option p points at.
func bindField(fs *pflag.FlagSet, f *Flag, p any) {
	switch p := p.(type) {
	case pflag.Value:
		fs.Var(p, f.Name, f.Usage)
	case *string:
		fs.StringVar(p, f.Name, *p, f.Usage)
	case *bool:
		fs.BoolVar(p, f.Name, *p, f.Usage)
	case *int:
		fs.IntVar(p, f.Name, *p, f.Usage)
	case *float64:
		fs.Float64Var(p, f.Name, *p, f.Usage)
	case *time.Duration:
		fs.DurationVar(p, f.Name, *p, f.Usage)
	case *[]string:
		if f.Type == "stringSlice" {
			fs.StringSliceVar(p, f.Name, *p, f.Usage)
		} else {
			fs.StringArrayVar(p, f.Name, *p, f.Usage)
		}
	default:
		panic(fmt.Sprintf("flag --%s: unsupported field type %T", f.Name, p))
	}
}

// placeholder registers a flag Quotascale does not implement with upstream's
// type and default, so that a value upstream's binary would refuse to parse is
// refused here too, and CheckFlags can compare what was set with the default.
func placeholder(fs *pflag.FlagSet, f *Flag) {
	must := func(err error) {
		if err != nil {
			panic(fmt.Sprintf("flag --%s: upstream default %q: %v", f.Name, f.Upstream, err))
		}
	}
	switch f.Type {
	case "string":
		fs.String(f.Name, f.Upstream, f.Usage)
	case "bool":
		fs.Bool(f.Name, false, f.Usage)
		must(fs.Set(f.Name, f.Upstream))
	case "int":
		fs.Int(f.Name, 0, f.Usage)
		must(fs.Set(f.Name, f.Upstream))
	case "float64":
		fs.Float64(f.Name, 0, f.Usage)
		must(fs.Set(f.Name, f.Upstream))
	case "duration":
		fs.Duration(f.Name, 0, f.Usage)
		must(fs.Set(f.Name, f.Upstream))
	case "stringArray":
		fs.StringArray(f.Name, nil, f.Usage)
	case "stringSlice":
		fs.StringSlice(f.Name, nil, f.Usage)
	case "cidrs":
		v, err := parseCIDRs(f.Upstream)
		must(err)
		fs.Var(v, f.Name, f.Usage)
	default:
		panic(fmt.Sprintf("flag --%s: no placeholder for type %q", f.Name, f.Type))
	}
	// fs.Set above marked the flag as set on the command line, and the default
	// --help prints was taken before it; make it upstream's default, unset.
	flag := fs.Lookup(f.Name)
	flag.Changed = false
	flag.DefValue = flag.Value.String()
}

// CheckFlags looks at every flag set on fs's command line: a Refused flag at a
// value other than upstream's default is an error naming the flag, the value
// and why; a NoEffect flag at a value other than upstream's default gives a
// warning naming the flag. Errors and warnings are in the order of the table,
// so one start shows them all.
func CheckFlags(fs *pflag.FlagSet) (warnings []string, err error) {
	var refused []string
	for _, f := range Flags() {
		if f.Treatment == Implemented {
			continue
		}
		flag := fs.Lookup(f.Name)
		if flag == nil || !flag.Changed {
			continue
		}
		value := flag.Value.String()
		if value == f.Upstream {
			continue
		}
		switch f.Treatment {
		case NoEffect:
			warnings = append(warnings, fmt.Sprintf("--%s=%s has no effect in Quotascale: %s", f.Name, value, f.Why))
		case Refused:
			refused = append(refused, fmt.Sprintf("--%s=%s is not supported: %s", f.Name, value, f.Why))
		}
	}
	if len(refused) > 0 {
		return warnings, fmt.Errorf("unsupported flags: %s", strings.Join(refused, "; "))
	}
	return warnings, nil
}
