package config

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// parse runs args through a fresh flag set over the defaults, the way main does
// (without the logging flags, which app.NewCommandLine adds), and returns the
// options, the flag parsing error and the errors of CheckFlags and Validate.
func parse(args []string) (Options, error, error) {
	o := Defaults()
	fs := pflag.NewFlagSet("cluster-autoscaler", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err, nil
	}
	_, err := CheckFlags(fs)
	return o, nil, errors.Join(err, o.Validate())
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestBadFlagsTable is the reviewable list of bad autoscaler flags with the
// exact text the autoscaler exits with: a flag that does not parse is refused
// by the flag set (main prints it with the usage), a value that parses but
// makes no sense by Validate. Either way the autoscaler does not start, so a
// typo never runs with a half-applied configuration.
func TestBadFlagsTable(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		parseErr  string
		validErr  string
		unchanged bool // the flag's target keeps its default after a parse error
	}{
		{name: "cores-total without a colon", args: []string{"--cores-total=8"},
			parseErr: `invalid argument "8" for "--cores-total" flag: "8" is not <min>:<max>`, unchanged: true},
		{name: "cores-total empty", args: []string{"--cores-total="},
			parseErr: `invalid argument "" for "--cores-total" flag: "" is not <min>:<max>`, unchanged: true},
		{name: "cores-total min not a number", args: []string{"--cores-total=a:8"},
			parseErr: `invalid argument "a:8" for "--cores-total" flag: "a:8": min is not an integer`, unchanged: true},
		{name: "cores-total fractional max", args: []string{"--cores-total=0:1.5"},
			parseErr: `invalid argument "0:1.5" for "--cores-total" flag: "0:1.5": max is not an integer`, unchanged: true},
		{name: "cores-total three fields", args: []string{"--cores-total=1:2:3"},
			parseErr: `invalid argument "1:2:3" for "--cores-total" flag: "1:2:3": max is not an integer`, unchanged: true},
		{name: "cores-total negative min", args: []string{"--cores-total=-1:8"},
			parseErr: `invalid argument "-1:8" for "--cores-total" flag: "-1:8": want 0 <= min <= max`, unchanged: true},
		{name: "cores-total min above max", args: []string{"--cores-total=9:8"},
			parseErr: `invalid argument "9:8" for "--cores-total" flag: "9:8": want 0 <= min <= max`, unchanged: true},
		{
			// The unit is GiB by definition; a quantity suffix is not accepted.
			name: "memory-total with a unit", args: []string{"--memory-total=0:64Gi"},
			parseErr: `invalid argument "0:64Gi" for "--memory-total" flag: "0:64Gi": max is not an integer`, unchanged: true,
		},
		{name: "memory-total beyond int64", args: []string{"--memory-total=0:99999999999999999999"},
			parseErr: `invalid argument "0:99999999999999999999" for "--memory-total" flag: "0:99999999999999999999": max is not an integer`, unchanged: true},
		{
			// Regression (fuzzing): the max in bytes wrapped around to a
			// negative limit, which voided the cluster-wide quota and with it
			// --max-nodes-total.
			name: "memory-total max overflows in bytes", args: []string{"--memory-total=0:8589934592"},
			parseErr: `invalid argument "0:8589934592" for "--memory-total" flag: "0:8589934592": max is above 8589934591`, unchanged: true,
		},
		{name: "memory-total both bounds overflow", args: []string{"--memory-total=9223372036854775807:9223372036854775807"},
			parseErr: `invalid argument "9223372036854775807:9223372036854775807" for "--memory-total" flag: "9223372036854775807:9223372036854775807": max is above 8589934591`, unchanged: true},
		{name: "threshold not a number", args: []string{"--scale-down-utilization-threshold=half"},
			parseErr: `invalid argument "half" for "--scale-down-utilization-threshold" flag: strconv.ParseFloat: parsing "half": invalid syntax`},
		{name: "duration without a unit", args: []string{"--scan-interval=10"},
			parseErr: `invalid argument "10" for "--scan-interval" flag: time: missing unit in duration "10"`},
		{name: "bool that is not one", args: []string{"--leader-elect=maybe"},
			parseErr: `invalid argument "maybe" for "--leader-elect" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{name: "unknown flag", args: []string{"--cores=8"}, parseErr: "unknown flag: --cores"},
		{name: "flag without its value", args: []string{"--cloud-provider"}, parseErr: "flag needs an argument: --cloud-provider"},

		{name: "unsupported cloud provider", args: []string{"--cloud-provider=gce"},
			validErr: `invalid options: --cloud-provider "gce" is not supported: use kwok or clusterapi`},
		{name: "cloud provider in capitals", args: []string{"--cloud-provider=Kwok"},
			validErr: `invalid options: --cloud-provider "Kwok" is not supported: use kwok or clusterapi`},
		{name: "empty cloud provider", args: []string{"--cloud-provider="},
			validErr: `invalid options: --cloud-provider "" is not supported: use kwok or clusterapi`},
		{name: "kwok state without a namespace", args: []string{"--kwok-state-configmap=quotascale-kwok-cloud"},
			validErr: `invalid options: --kwok-state-configmap must be NAMESPACE/NAME, got "quotascale-kwok-cloud"`},
		{name: "kwok state with an empty namespace", args: []string{"--kwok-state-configmap=/quotascale-kwok-cloud"},
			validErr: `invalid options: --kwok-state-configmap must be NAMESPACE/NAME, got "/quotascale-kwok-cloud"`},
		{name: "kwok state with an empty name", args: []string{"--kwok-state-configmap=kube-system/"},
			validErr: `invalid options: --kwok-state-configmap must be NAMESPACE/NAME, got "kube-system/"`},
		{name: "threshold above one", args: []string{"--scale-down-utilization-threshold=1.5"},
			validErr: "invalid options: --scale-down-utilization-threshold must be between 0 and 1, got 1.5"},
		{name: "threshold negative", args: []string{"--scale-down-utilization-threshold=-0.1"},
			validErr: "invalid options: --scale-down-utilization-threshold must be between 0 and 1, got -0.1"},
		{
			// Regression (fuzzing): NaN compared false with both bounds and
			// passed.
			name: "threshold NaN", args: []string{"--scale-down-utilization-threshold=NaN"},
			validErr: "invalid options: --scale-down-utilization-threshold must be between 0 and 1, got NaN",
		},
		{name: "threshold infinite", args: []string{"--scale-down-utilization-threshold=+Inf"},
			validErr: "invalid options: --scale-down-utilization-threshold must be between 0 and 1, got +Inf"},
		{name: "zero scan interval", args: []string{"--scan-interval=0s"},
			validErr: "invalid options: --scan-interval must be positive, got 0s"},
		{name: "negative max nodes", args: []string{"--max-nodes-total=-1"},
			validErr: "invalid options: --max-nodes-total must not be negative, got -1"},
		{name: "negative provision time", args: []string{"--max-node-provision-time=-1m"},
			validErr: "invalid options: --max-node-provision-time must be positive, got -1m0s"},
		{name: "zero nodes per scale-up", args: []string{"--max-nodes-per-scaleup=0"},
			validErr: "invalid options: --max-nodes-per-scaleup must be positive, got 0"},
		{name: "initial backoff above max backoff", args: []string{"--initial-node-group-backoff-duration=1h"},
			validErr: "invalid options: --initial-node-group-backoff-duration (1h0m0s) must be positive and at most --max-node-group-backoff-duration (30m0s)"},
		{name: "negative bulk delete", args: []string{"--max-empty-bulk-delete=-1"},
			validErr: "invalid options: --max-empty-bulk-delete (-1) and --max-graceful-termination-sec (600) must not be negative"},
		{name: "zero visibility log size", args: []string{"--visibility-log-max-size-mb=0"},
			validErr: "invalid options: --visibility-log-max-size-mb must be positive, got 0"},
		{name: "negative visibility log size", args: []string{"--visibility-log-max-size-mb=-1"},
			validErr: "invalid options: --visibility-log-max-size-mb must be positive, got -1"},
		{name: "negative visibility log backups", args: []string{"--visibility-log-max-backups=-1"},
			validErr: "invalid options: --visibility-log-max-backups (-1) and --visibility-log-max-age-days (7) must not be negative (0 keeps every rotated file)"},
		{name: "negative visibility log age", args: []string{"--visibility-log-max-age-days=-7"},
			validErr: "invalid options: --visibility-log-max-backups (5) and --visibility-log-max-age-days (-7) must not be negative (0 keeps every rotated file)"},
		{name: "visibility log size with a unit", args: []string{"--visibility-log-max-size-mb=100Mi"},
			parseErr: `invalid argument "100Mi" for "--visibility-log-max-size-mb" flag: strconv.ParseInt: parsing "100Mi": invalid syntax`},
		{name: "zero stale data bound", args: []string{"--max-stale-data=0s"},
			validErr: "invalid options: --max-stale-data must be positive, got 0s"},
		{
			// Every problem at once, in a fixed order, so one restart shows them all.
			name: "several problems",
			args: []string{"--cloud-provider=aws", "--scan-interval=0s", "--kwok-state-configmap=x", "--scale-down-utilization-threshold=2"},
			validErr: "invalid options: --scan-interval must be positive, got 0s; " +
				"--scale-down-utilization-threshold must be between 0 and 1, got 2; " +
				`--kwok-state-configmap must be NAMESPACE/NAME, got "x"; ` +
				`--cloud-provider "aws" is not supported: use kwok or clusterapi`,
		},
	}
	defaults := Defaults()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, parseErr, validErr := parse(tt.args)
			if diff := cmp.Diff(tt.parseErr, errText(parseErr)); diff != "" {
				t.Errorf("flag parsing error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.validErr, errText(validErr)); diff != "" {
				t.Errorf("Validate error (-want +got):\n%s", diff)
			}
			if tt.unchanged {
				// A refused range must not leave one bound written and the
				// other not.
				got := [4]int64{o.MinCoresTotal, o.MaxCoresTotal, o.MinMemoryTotal, o.MaxMemoryTotal}
				want := [4]int64{defaults.MinCoresTotal, defaults.MaxCoresTotal, defaults.MinMemoryTotal, defaults.MaxMemoryTotal}
				if got != want {
					t.Errorf("ranges after a refused flag = %v, want the defaults %v", got, want)
				}
			}
		})
	}
}

// TestGoodFlags pins what the range flags and Validate accept, so the table
// above cannot pass merely because everything is refused.
func TestGoodFlags(t *testing.T) {
	o, parseErr, validErr := parse([]string{
		"--cores-total= 2 : 64 ", "--memory-total=4:256", "--cloud-provider=clusterapi",
		"--kwok-state-configmap=ns/name", "--scale-down-utilization-threshold=0", "--scan-interval=1s",
		"--visibility-log-max-backups=0", "--visibility-log-max-age-days=0", "--visibility-log-compress=false",
	})
	if parseErr != nil || validErr != nil {
		t.Fatalf("parse: %v, validate: %v", parseErr, validErr)
	}
	got := [4]int64{o.MinCoresTotal, o.MaxCoresTotal, o.MinMemoryTotal, o.MaxMemoryTotal}
	if want := [4]int64{2, 64, 4 << 30, 256 << 30}; got != want {
		t.Errorf("ranges = %v, want %v", got, want)
	}
	// The largest memory max that fits in bytes is taken exactly.
	largest, parseErr, validErr := parse([]string{"--memory-total=8589934591:8589934591"})
	if parseErr != nil || validErr != nil {
		t.Fatalf("parse: %v, validate: %v", parseErr, validErr)
	}
	if want := int64(8589934591) << 30; largest.MinMemoryTotal != want || largest.MaxMemoryTotal != want {
		t.Errorf("--memory-total=8589934591:8589934591 = %d:%d bytes, want %d both", largest.MinMemoryTotal, largest.MaxMemoryTotal, want)
	}
	if o.CloudProviderName != "clusterapi" || o.KwokState != "ns/name" || o.ScanInterval != time.Second {
		t.Errorf("options = %+v", o)
	}
	defaults := Defaults()
	if err := defaults.Validate(); err != nil {
		t.Errorf("the defaults are invalid: %v", err)
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o = Defaults()
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--help = %v, want pflag.ErrHelp", err)
	}
	if got := fs.Lookup("memory-total").Value.String(); got != "0:6400000" {
		t.Errorf("--memory-total default prints %q, want 0:6400000", got)
	}
}
