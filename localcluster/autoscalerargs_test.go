package localcluster

import (
	goflag "flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

func localUpArgs(t *testing.T, clusterAPI, inProcess bool, user ...string) autoscalerArgs {
	t.Helper()
	opts := NodeGroupsOptions{Config: "/groups.yaml", ClusterAPI: clusterAPI, NoAutoscaler: !inProcess, AutoscalerArgs: user, ScanInterval: 2 * time.Second}
	kubeconfig, addr := "", ""
	if !inProcess {
		kubeconfig, addr = "/tmp/kube config", "127.0.0.1:8085"
	}
	args, err := opts.autoscalerArgs(kubeconfig, addr)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// TestAutoscalerArgsReachOptions: a user's flag, parsed by the autoscaler's
// own command line, sets the option the in-process autoscaler is started
// with, over local-up's defaults.
func TestAutoscalerArgsReachOptions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clusterAPI bool
		user       []string
		want       func(o *config.Options)
	}{{
		name: "local-up's defaults",
		want: func(o *config.Options) {},
	}, {
		name: "balance-similar-node-groups",
		user: []string{"--balance-similar-node-groups"},
		want: func(o *config.Options) { o.BalanceSimilarNodeGroups = true },
	}, {
		name: "scale-down disabled, chart style",
		user: []string{"--scale-down-enabled=false", "--expander", "priority,least-waste"},
		want: func(o *config.Options) { o.ScaleDownEnabled = false; o.Expander = "priority,least-waste" },
	}, {
		name: "the user's scan interval wins",
		user: []string{"--scan-interval=10s"},
		want: func(o *config.Options) { o.ScanInterval = 10 * time.Second },
	}, {
		name: "local-up's own value repeated",
		user: []string{"--cloud-provider=kwok"},
		want: func(o *config.Options) {},
	}, {
		name:       "cluster api",
		clusterAPI: true,
		user:       []string{"--cloud-provider=clusterapi", "--max-nodes-total=7"},
		want: func(o *config.Options) {
			o.CloudProviderName, o.CloudConfig, o.MaxNodesTotal = "clusterapi", "", 7
			o.NodeGroupAutoDiscovery = []string{"clusterapi:namespace=default,clusterName=localcluster"}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := localUpArgs(t, tc.clusterAPI, true, tc.user...).parse()
			if err != nil {
				t.Fatal(err)
			}
			want := config.Defaults()
			want.CloudConfig = "/groups.yaml"
			want.ElasticQuotaSchedulerNames = []string{"default-scheduler"}
			want.ScanInterval = 2 * time.Second
			want.LeaderElect = false
			tc.want(&want)
			if diff := cmp.Diff(want, parsed.opts); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if len(parsed.warnings) > 0 {
				t.Errorf("warnings %q", parsed.warnings)
			}
		})
	}
}

// TestAutoscalerArgsErrors: what the binary refuses, local-up refuses before
// starting anything, naming the flag; and local-up's own flags cannot be
// pointed elsewhere.
func TestAutoscalerArgsErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clusterAPI bool
		inProcess  bool
		user       []string
		want       []string
	}{
		{name: "unknown", inProcess: true, user: []string{"--no-such-flag"}, want: []string{"unknown flag: --no-such-flag"}},
		{name: "bad value", inProcess: true, user: []string{"--scale-down-enabled=maybe"}, want: []string{"--scale-down-enabled"}},
		{name: "refused", inProcess: true, user: []string{"--debugging-snapshot-enabled=true"},
			want: []string{"--debugging-snapshot-enabled=true is not supported"}},
		{name: "invalid", inProcess: true, user: []string{"--scale-down-utilization-threshold=2"},
			want: []string{"--scale-down-utilization-threshold must be between 0 and 1"}},
		{name: "positional", inProcess: true, user: []string{"balance"}, want: []string{`unexpected arguments ["balance"]`}},
		{name: "another provider", inProcess: true, user: []string{"--cloud-provider=clusterapi"},
			want: []string{"--cloud-provider=clusterapi: local-up points the autoscaler at its own cluster and node groups with --cloud-provider=kwok"}},
		{name: "kwok on cluster api", clusterAPI: true, inProcess: true, user: []string{"--cloud-provider=kwok"},
			want: []string{"--cloud-provider=kwok: local-up points the autoscaler at its own cluster and node groups with --cloud-provider=clusterapi"}},
		{name: "a production cluster's groups", clusterAPI: true, user: []string{"--node-group-auto-discovery=clusterapi:namespace=prod"},
			want: []string{"--node-group-auto-discovery=clusterapi:namespace=default,clusterName=localcluster --node-group-auto-discovery=clusterapi:namespace=prod: " +
				"local-up points the autoscaler at its own cluster and node groups with --node-group-auto-discovery=clusterapi:namespace=default,clusterName=localcluster;"}},
		{name: "a kubeconfig in process", inProcess: true, user: []string{"--kubeconfig=/etc/prod"},
			want: []string{"--kubeconfig=/etc/prod: local-up points the autoscaler at its own cluster and node groups with --kubeconfig unset"}},
		{name: "another kubeconfig", user: []string{"--kubeconfig=/etc/prod"},
			want: []string{"--kubeconfig=/etc/prod: local-up points the autoscaler at its own cluster and node groups with --kubeconfig=/tmp/kube config"}},
		{name: "feature gates in process", inProcess: true, user: []string{"--feature-gates=LoggingAlphaOptions=true"},
			want: []string{"--feature-gates: the in-process autoscaler shares the control plane's feature gates"}},
		{name: "version", user: []string{"--version"}, want: []string{"--version is for the binary itself"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := localUpArgs(t, tc.clusterAPI, tc.inProcess, tc.user...).parse()
			if err == nil {
				t.Fatalf("%q parsed", tc.user)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestAutoscalerArgsForTheBinary: the command line written out parses, with
// the binary's own command line, to the options local-up parsed; upstream's
// leaves out Quotascale's own flags; flags of the process (logging, feature
// gates) go to the binary, and in process only warn.
func TestAutoscalerArgsForTheBinary(t *testing.T) {
	user := []string{"--balance-similar-node-groups", "--balancing-ignore-label=a", "--balancing-ignore-label=b,c",
		"--elastic-quota-enabled=false", "--v=4", "--logtostderr=true", "--feature-gates=LoggingAlphaOptions=true",
		"--skip-nodes-with-local-storage=false", "--expander=priority,least-waste"}
	parsed, err := localUpArgs(t, true, false, user...).parse()
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Defaults()
	cmdline := app.NewCommandLine(&opts)
	gate := cmdline.FeatureGate.DeepCopy()
	cmdline.FeatureGate = gate
	cmdline.FlagSet.Lookup("feature-gates").Value = gate.(pflag.Value)
	func() {
		defer klog.CaptureState().Restore()
		if _, err := cmdline.Parse(parsed.args); err != nil {
			t.Fatalf("the binary refuses %q: %v", parsed.args, err)
		}
	}()
	if diff := cmp.Diff(parsed.opts, opts); diff != "" {
		t.Errorf("the binary's options differ from local-up's (-local-up +binary):\n%s", diff)
	}
	for _, want := range []string{"--kubeconfig=/tmp/kube config", "--address=127.0.0.1:8085", "--leader-elect=false", "--v=4",
		"--feature-gates=LoggingAlphaOptions=true", "--balancing-ignore-label=b,c", "--scan-interval=2s"} {
		if !slices.Contains(parsed.args, want) {
			t.Errorf("%q lacks %s", parsed.args, want)
		}
	}
	if !gate.Enabled(featuregate.Feature("LoggingAlphaOptions")) {
		t.Error("the binary's feature gate was not set")
	}
	for _, arg := range parsed.upstreamArgs {
		if strings.HasPrefix(arg, "--elastic-quota") {
			t.Errorf("upstream's command line has Quotascale's own %s", arg)
		}
	}
	if len(parsed.upstreamArgs) != len(parsed.args)-2 {
		t.Errorf("upstream's command line %q is not Quotascale's %q less its two own flags", parsed.upstreamArgs, parsed.args)
	}

	inProcess, err := localUpArgs(t, false, true, "--v=4", "--leader-elect=true").parse()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inProcess.warnings, "\n"); !strings.Contains(got, "--v applies to the cluster-autoscaler binary only") ||
		!strings.Contains(got, "--leader-elect=true applies to the cluster-autoscaler binary only") {
		t.Errorf("warnings %q, want --v and --leader-elect named", inProcess.warnings)
	}
}

// TestAutoscalerArgsForTheBinaryAlone: with no flags of the user's, the
// binary's command line is local-up's flags and nothing else.
func TestAutoscalerArgsForTheBinaryAlone(t *testing.T) {
	parsed, err := localUpArgs(t, false, false).parse()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--address=127.0.0.1:8085", "--cloud-config=/groups.yaml", "--cloud-provider=kwok",
		"--elastic-quota-scheduler-names=default-scheduler", "--kubeconfig=/tmp/kube config",
		"--kwok-state-configmap=kube-system/quotascale-kwok-cloud", "--leader-elect=false", "--scan-interval=2s"}
	if diff := cmp.Diff(want, parsed.args); diff != "" {
		t.Errorf("the binary's command line (-want +got):\n%s", diff)
	}
}

// TestAutoscalerArgsLeaveTheProcessAlone: parsing sets neither klog's
// process-wide flags nor the process's feature gates, which the control
// plane in the same process uses.
func TestAutoscalerArgsLeaveTheProcessAlone(t *testing.T) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	before := klogFlags.Lookup("log_file").Value.String()
	if _, err := localUpArgs(t, false, false, "--log-file=/tmp/autoscaler.log", "--feature-gates=LoggingAlphaOptions=true").parse(); err != nil {
		t.Fatal(err)
	}
	if after := klogFlags.Lookup("log_file").Value.String(); after != before {
		t.Errorf("klog's log_file is %q after parsing, was %q", after, before)
	}
	if utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature("LoggingAlphaOptions")) {
		t.Error("the process's LoggingAlphaOptions gate was turned on")
	}
}
