// Package command is Quotascale's kube-scheduler command: upstream's, with the
// CapacityScheduling plugin registered and told whether this replica leads.
// The binary runs it and the flags reference (docs/flags.md) is generated from it.
package command

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// New returns the kube-scheduler command. Its flags and configuration are
// upstream's, and it runs upstream's Setup and Run.
//
// It is not app.NewSchedulerCommand because the plugin must learn whether
// kube-scheduler's own leader election chose this replica, and nothing
// upstream tells plugins: Run sets the election's callbacks itself, and the
// upstream command keeps its configuration to itself. What is left is the
// lock the election reads and writes its lease through, and this command
// wraps it (observedLock).
func New() *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: "kube-scheduler",
		Long: `The Kubernetes scheduler with Quotascale's CapacityScheduling plugin
registered: enable the plugin in a profile of the KubeSchedulerConfiguration
given with --config. Every upstream flag and setting works as usual.`,
		// Feature gates are set before RunE.
		PersistentPreRunE: func(*cobra.Command, []string) error { return opts.ComponentGlobalsRegistry.Set() },
		RunE:              func(cmd *cobra.Command, _ []string) error { return run(cmd, opts) },
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if arg != "" {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	named := opts.Flags
	verflag.AddFlags(named.FlagSet("global"))
	globalflag.AddGlobalFlags(named.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, fs := range named.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *named, cols)
	// Only shell completion reads it; the flag exists.
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	return cmd
}

// run is what upstream's command runs, with the plugin told whether this
// replica leads.
func run(cmd *cobra.Command, opts *options.Options) error {
	verflag.PrintAndExitIfRequested()
	gate := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, gate); err != nil {
		return fmt.Errorf("logging configuration: %w", err)
	}
	cliflag.PrintFlags(cmd.Flags())
	if opts.InformerName == nil {
		name, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return fmt.Errorf("naming the scheduler's informers: %w", err)
		}
		opts.InformerName = name
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()

	leadership := &capacityscheduling.Leadership{}
	cc, sched, err := app.Setup(ctx, opts, app.WithPlugin(capacityscheduling.Name, leadership.Factory()))
	if err != nil {
		return err
	}
	if mutable, ok := gate.(featuregate.MutableFeatureGate); ok {
		mutable.AddMetrics()
	}
	opts.ComponentGlobalsRegistry.AddMetrics()
	if cc.LeaderElection == nil {
		// One replica, leading from the start.
		leadership.SetLeading(true)
	} else {
		cc.LeaderElection.Lock = &observedLock{Interface: cc.LeaderElection.Lock, leadership: leadership}
	}
	return app.Run(ctx, cc, sched)
}
