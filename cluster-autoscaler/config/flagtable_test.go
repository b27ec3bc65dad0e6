package config

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// TestFlagRows checks that every row is complete and consistent, so that a
// later change to one row (a flag becoming implemented) cannot leave it half
// done.
func TestFlagRows(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Flags() {
		if seen[f.Name] {
			t.Errorf("--%s has two rows", f.Name)
		}
		seen[f.Name] = true
		if f.Type == "" || f.Usage == "" {
			t.Errorf("--%s: type %q, usage %q: both are required", f.Name, f.Type, f.Usage)
		}
		if strings.TrimSpace(f.Usage) != f.Usage || !strings.HasSuffix(f.Usage, ".") {
			t.Errorf("--%s: usage %q must be one trimmed sentence or more, ending in a period", f.Name, f.Usage)
		}
		if got, want := f.Field != nil, f.Treatment == Implemented && f.By == ByTable; got != want {
			t.Errorf("--%s: has a Field: %v, want %v (implemented and registered by the table)", f.Name, got, want)
		}
		if f.Treatment != Implemented && f.Why == "" {
			t.Errorf("--%s (%s) must say why", f.Name, f.Treatment)
		}
		if f.Issue != 0 && f.Treatment == Implemented {
			t.Errorf("--%s is implemented but still names issue #%d", f.Name, f.Issue)
		}
		if f.Own && (f.Upstream != "" || f.Ours != "" || f.Treatment != Implemented) {
			t.Errorf("--%s is Quotascale's own: no upstream default, no Ours, implemented", f.Name)
		}
		if f.Ours != "" && f.Ours == f.Upstream {
			t.Errorf("--%s: Ours %q is upstream's default; leave it empty", f.Name, f.Ours)
		}
	}
}

// TestAddFlagsTypesAndDefaults checks the rows the table registers: the
// type and the default the flag set shows are the row's (Defaults for
// implemented flags, upstream's for the others).
func TestAddFlagsTypesAndDefaults(t *testing.T) {
	o := Defaults()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(fs)
	registered := 0
	for _, f := range Flags() {
		flag := fs.Lookup(f.Name)
		if f.By != ByTable {
			if flag != nil {
				t.Errorf("--%s is registered by AddFlags but its row says another registrar", f.Name)
			}
			continue
		}
		registered++
		if flag == nil {
			t.Errorf("--%s is not registered", f.Name)
			continue
		}
		if flag.Value.Type() != f.Type {
			t.Errorf("--%s has type %q, its row says %q", f.Name, flag.Value.Type(), f.Type)
		}
		if !f.Own && flag.DefValue != f.Default() {
			t.Errorf("--%s has default %q, its row says %q", f.Name, flag.DefValue, f.Default())
		}
		if flag.Changed {
			t.Errorf("--%s is marked as set before parsing", f.Name)
		}
	}
	count := 0
	fs.VisitAll(func(*pflag.Flag) { count++ })
	if count != registered {
		t.Errorf("AddFlags registered %d flags, the table %d", count, registered)
	}
}

func TestCheckFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		warnings []string
		err      string
	}{
		{name: "nothing set"},
		{name: "upstream's defaults set explicitly", args: []string{
			"--estimator=binpacking", "--regional=false", "--scale-down-unready-time=20m", "--enable-provisioning-requests=false",
			"--enable-dynamic-resource-allocation", "--node-group-auto-discovery=", "--nodes", "1:2:x",
		}, warnings: []string{
			`--nodes=[1:2:x] has no effect in Quotascale: clusterapi takes node groups and their sizes from the MachineDeployment and MachineSet annotations (upstream's clusterapi ignores --nodes as well), kwok from --cloud-config`,
		}},
		{name: "no effect", args: []string{"--regional", "--gce-concurrent-refreshes=3", "--cloud-provider-gce-lb-src-cidrs=10.0.0.0/8"},
			warnings: []string{
				"--cloud-provider-gce-lb-src-cidrs=10.0.0.0/8 has no effect in Quotascale: it tunes the gce provider, which is not built in",
				"--gce-concurrent-refreshes=3 has no effect in Quotascale: it tunes the gce provider, which is not built in",
				"--regional=true has no effect in Quotascale: it tunes the gce provider, which is not built in",
			}},
		{name: "refused, every one named", args: []string{"--estimator=other", "--enable-provisioning-requests", "--regional"},
			warnings: []string{"--regional=true has no effect in Quotascale: it tunes the gce provider, which is not built in"},
			err: "unsupported flags: --enable-provisioning-requests=true is not supported: ProvisioningRequests are not supported; " +
				"--estimator=other is not supported: binpacking is the only estimator, as upstream"},
		{name: "implemented flags are Validate's business", args: []string{"--scan-interval=1s", "--cloud-provider=aws"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			warnings, err := CheckFlags(fs)
			if diff := cmp.Diff(tt.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.err, errText(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlaceholderTypes: a flag Quotascale does not implement still parses as
// upstream's does, so a value upstream refuses is refused here too.
func TestPlaceholderTypes(t *testing.T) {
	tests := []struct {
		args []string
		err  string
	}{
		{[]string{"--provisioning-request-max-backoff-time=2"}, `invalid argument "2" for "--provisioning-request-max-backoff-time" flag: time: missing unit in duration "2"`},
		{[]string{"--regional=maybe"}, `invalid argument "maybe" for "--regional" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{[]string{"--min-replica-count=1.5"}, `invalid argument "1.5" for "--min-replica-count" flag: strconv.ParseInt: parsing "1.5": invalid syntax`},
		{[]string{"--cloud-provider-gce-l7lb-src-cidrs=10.0.0.0"}, `invalid argument "10.0.0.0" for "--cloud-provider-gce-l7lb-src-cidrs" flag: invalid CIDR address: 10.0.0.0`},
		{[]string{"--cloud-provider-gce-l7lb-src-cidrs=10.0.0.0/8", "--cloud-provider-gce-l7lb-src-cidrs=10.0.0.0/8"},
			`invalid argument "10.0.0.0/8" for "--cloud-provider-gce-l7lb-src-cidrs" flag: set more than once`},
	}
	for _, tt := range tests {
		_, parseErr, _ := parse(tt.args)
		if diff := cmp.Diff(tt.err, errText(parseErr)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.args, diff)
		}
	}
}
