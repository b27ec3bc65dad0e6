// Command cluster-autoscaler is Quotascale's cluster autoscaler: the upstream
// loop shape and flags, with every scale-up checked against the CapacityQuotas
// matching the new node (nodes still being provisioned included) and against the
// ElasticQuotaTree of the pods it is for.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	opts := config.Defaults()
	cmdline := app.NewCommandLine(&opts)
	if err := cmdline.FlagSet.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *cmdline.ShowVersion {
		fmt.Println("cluster-autoscaler", version.String())
		return nil
	}
	if err := logsapi.ValidateAndApply(cmdline.Logging, nil); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	defer logs.FlushLogs()
	if err := opts.Validate(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx).WithName(app.Component)
	ctx = klog.NewContext(ctx, logger)
	restConfig, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	logger.Info("Starting", "version", version.String(), "cloudProvider", opts.CloudProviderName)
	process := app.NewProcess(opts)
	if _, err := process.Serve(ctx, opts.Address); err != nil {
		return err
	}
	var runErr error
	err = app.RunWithLeaderElection(ctx, opts, restConfig, func(ctx context.Context) {
		a, err := app.New(ctx, opts, restConfig, process)
		if err != nil {
			runErr = err
			stop()
			return
		}
		a.Run(ctx)
	})
	if err != nil {
		return err
	}
	return runErr
}
