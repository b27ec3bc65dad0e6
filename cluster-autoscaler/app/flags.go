package app

import (
	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// CommandLine is cluster-autoscaler's command line: the options, component-base
// logging and --version. The binary parses it and the flags reference
// (docs/flags.md) is generated from it, so the two cannot drift apart.
type CommandLine struct {
	FlagSet     *pflag.FlagSet
	Logging     *logsapi.LoggingConfiguration
	ShowVersion *bool
}

// NewCommandLine binds the flags to opts, whose values are the defaults.
func NewCommandLine(opts *config.Options) *CommandLine {
	fs := pflag.NewFlagSet(Component, pflag.ContinueOnError)
	opts.AddFlags(fs)
	logging := logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(logging, fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	logs.AddFlags(fs)
	return &CommandLine{FlagSet: fs, Logging: logging, ShowVersion: showVersion}
}
