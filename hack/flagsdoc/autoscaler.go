package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// renderAutoscaler writes the autoscaler's section of docs/flags.md: every flag
// of the binary's flag set, with its row of the flag table.
func renderAutoscaler(b *bytes.Buffer) {
	opts := config.Defaults()
	fs := app.NewCommandLine(&opts).FlagSet
	b.WriteString("## cluster-autoscaler\n\n")
	b.WriteString("Every flag of the upstream cluster autoscaler's binary is here, with upstream's name, type and\n" +
		"default, and one of these treatments ([migrating from upstream](migrating-from-upstream.md) lists them by treatment):\n\n" +
		"- **implemented**: does what upstream's does;\n" +
		"- **no effect**: accepted, because no value changes what Quotascale does; a value other than upstream's default\n" +
		"  logs one warning naming the flag at start-up;\n" +
		"- **refused**: accepted at upstream's default; any other value stops the process with the reason;\n" +
		"- **Quotascale's own**: not a flag of upstream's.\n\n" +
		"Flag names may be written with `_` for `-`, as upstream allows (`--log_file`). A boolean takes its value after\n" +
		"`=` (`--leader-elect=false`); a stray argument stops the process.\n\n")
	b.WriteString("| flag | default | treatment | description |\n| --- | --- | --- | --- |\n")
	for _, f := range config.Flags() {
		flag := fs.Lookup(f.Name)
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", flagName(flag), cell(defaultCell(&f, flag)), treatmentCell(&f), cell(description(&f, flag)))
	}
	b.WriteString("\n")
}

// flagName is the flag as a user writes it, with its value's name.
func flagName(f *pflag.Flag) string {
	varname, _ := pflag.UnquoteUsage(f)
	name := "`--" + f.Name
	if varname != "" {
		name += " " + varname
	}
	name += "`"
	if f.Shorthand != "" {
		name = "`-" + f.Shorthand + "`, " + name
	}
	return name
}

func defaultCell(f *config.Flag, flag *pflag.Flag) string {
	def := code(flag.DefValue)
	if f.DefaultDiffers() {
		def += " (upstream: " + code(f.Upstream) + ")"
	}
	return def
}

func treatmentCell(f *config.Flag) string {
	if f.Own {
		return "Quotascale's own"
	}
	return f.Treatment.String()
}

// description is the usage, and for a flag not implemented what happens to it.
func description(f *config.Flag, flag *pflag.Flag) string {
	_, usage := pflag.UnquoteUsage(flag)
	var why string
	switch f.Treatment {
	case config.Implemented:
		if f.Why != "" {
			why = "Note: " + f.Why + "."
		}
	case config.NoEffect:
		why = "No effect: " + f.Why + "."
	case config.Refused:
		why = refusal(f) + ": " + f.Why + "."
	}
	if f.Issue != 0 {
		why += fmt.Sprintf(" Planned in #%d.", f.Issue)
	}
	return strings.TrimSpace(usage + " " + why)
}

// refusedValues says which values of a refused flag stop the process.
func refusedValues(f *config.Flag) string {
	switch {
	case f.Type == "bool":
		return code(strconv.FormatBool(f.Upstream != "true"))
	case f.Upstream == "[]":
		return "any"
	}
	return "other than " + code(f.Upstream)
}

// refusal is refusedValues as a sentence.
func refusal(f *config.Flag) string {
	switch values := refusedValues(f); {
	case values == "any":
		return "Any value stops the process"
	case strings.HasPrefix(values, "other than"):
		return "Values " + values + " stop the process"
	default:
		return values + " stops the process"
	}
}

// code writes a value as inline code; the empty string is shown as "".
func code(s string) string {
	if s == "" {
		return `""`
	}
	return "`" + machineIndependent(s) + "`"
}
