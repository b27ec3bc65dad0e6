// Command cluster-autoscaler is Quotascale's cluster autoscaler: the upstream
// loop shape and flags, with every scale-up checked against the CapacityQuotas
// matching the new node (nodes still being provisioned included) and against the
// ElasticQuotaTree of the pods it is for.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/pkg/version"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts := config.Defaults()
	cmdline := app.NewCommandLine(&opts)
	warnings, err := cmdline.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return nil // the usage is printed; as upstream, asking for it is no failure
	}
	if err != nil {
		return err
	}
	if *cmdline.ShowVersion {
		fmt.Println("cluster-autoscaler", version.String())
		return nil
	}
	logOpts, err := cmdline.LoggingOptions()
	if err != nil {
		return err
	}
	if err := logsapi.ValidateAndApplyWithOptions(cmdline.Logging, logOpts, cmdline.FeatureGate); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	defer logs.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx).WithName(app.Component)
	ctx = klog.NewContext(ctx, logger)
	for _, w := range warnings {
		klog.Warning(w) // at warning severity, which the contextual logger lacks
	}
	restConfig, err := restConfig(opts)
	if err != nil {
		return err
	}
	logger.Info("Starting", "version", version.String(), "cloudProvider", opts.CloudProviderName)
	// Before serving /health-check and before leader election: missing RBAC
	// stops the process with the rules to add, rather than leaving a standby
	// that looks healthy or a leader whose informers never sync.
	if err := app.CheckAccess(ctx, restConfig, opts); err != nil {
		return err
	}
	return app.Main(ctx, opts, restConfig)
}

// restConfig is the connection to the cluster, as upstream builds it from
// --kubernetes, --kubeconfig and the client flags. Clients of custom resources
// (dynamic clients) send JSON whatever --kube-api-content-type says.
func restConfig(opts config.Options) (*restclient.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags(opts.Master, opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.ContentType = opts.KubeAPIContentType
	cfg.QPS = float32(opts.KubeClientQPS)
	cfg.Burst = opts.KubeClientBurst
	return cfg, nil
}
