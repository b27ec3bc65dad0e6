package config

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzFlags feeds arbitrary command lines (arguments separated by newlines) to
// the autoscaler's flag set and Validate. Nothing may panic, every refusal must
// say something, and a command line that both parses and validates must leave
// options the autoscaler can act on: each range flag holds exactly the numbers
// given (times its unit, computed here with big integers), and the utilization
// threshold is in [0, 1].
func FuzzFlags(f *testing.F) {
	for _, seed := range []string{
		"",
		"--cores-total=2:64\n--memory-total=4:256",
		"--cores-total\n1:2",
		"--memory-total=0:8589934591",
		"--memory-total= 1 :+2",
		"--cloud-provider=clusterapi\n--kwok-state-configmap=a/b",
		"--scale-down-utilization-threshold=0.25\n--scan-interval=1s",
		"--max-nodes-total=-1\n--max-empty-bulk-delete=-3",
		"--initial-node-group-backoff-duration=1h\n--max-node-group-backoff-duration=2h",
		"--leader-elect=false\n--help",
		"-h",
		"--\n--cores-total=1:1",
		"--scale-down-utilization-threshold=NaN",
		"--memory-total=0:8589934592",
		"--memory-total=8589934592:8589934592",
		"--regional=true\n--estimator=other",
		"--log_file_max_size=3\n--max_nodes_total=4",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\n")
		}
		o, parseErr, validErr := parse(args)
		if parseErr != nil {
			if parseErr.Error() == "" {
				t.Fatal("flag parsing failed without a message")
			}
			return
		}
		if validErr != nil {
			if msg := validErr.Error(); !strings.HasPrefix(msg, "invalid options: --") && !strings.HasPrefix(msg, "unsupported flags: --") {
				t.Fatalf("refusal %q does not name a flag", validErr)
			}
			return
		}
		if !(o.ScaleDownUtilizationThreshold >= 0 && o.ScaleDownUtilizationThreshold <= 1) {
			t.Fatalf("--scale-down-utilization-threshold accepted as %v", o.ScaleDownUtilizationThreshold)
		}
		for _, r := range []struct {
			flag     string
			unit     int64
			min, max int64
		}{
			{"cores-total", 1, o.MinCoresTotal, o.MaxCoresTotal},
			{"memory-total", 1 << 30, o.MinMemoryTotal, o.MaxMemoryTotal},
		} {
			given, ok := lastValue(args, r.flag)
			if !ok {
				continue
			}
			lo, hi, _ := strings.Cut(given, ":")
			wantMin, wantMax := scaled(lo, r.unit), scaled(hi, r.unit)
			if !wantMin.IsInt64() || !wantMax.IsInt64() {
				t.Fatalf("--%s=%s overflows int64 and is accepted as %d:%d", r.flag, given, r.min, r.max)
			}
			if wantMin.Int64() != r.min || wantMax.Int64() != r.max {
				t.Fatalf("--%s=%s accepted as %d:%d, want %s:%s", r.flag, given, r.min, r.max, wantMin, wantMax)
			}
			if r.min < 0 || r.max < r.min {
				t.Fatalf("--%s=%s accepted as min %d, max %d", r.flag, given, r.min, r.max)
			}
		}
	})
}

// lastValue is the value the flag set applied last for flag, in either the
// --flag=value or the --flag value form, with "_" for "-" in the name as the
// flag set allows; parsing stops at "--".
func lastValue(args []string, flag string) (string, bool) {
	value, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "--") {
			// Only a flag's name is normalized: "_-x" is an argument.
			name, v, hasValue := strings.Cut(a[2:], "=")
			a = "--" + strings.ReplaceAll(name, "_", "-")
			if hasValue {
				a += "=" + v
			}
		}
		switch {
		case a == "--":
			return value, found
		case a == "--"+flag && i+1 < len(args):
			value, found = args[i+1], true
			i++
		case strings.HasPrefix(a, "--"+flag+"="):
			value, found = strings.TrimPrefix(a, "--"+flag+"="), true
		case strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && takesValue(strings.TrimPrefix(a, "--")):
			i++ // another flag's separate value, which may look like a flag
		}
	}
	return value, found
}

// takesValue reports whether a flag consumes the next argument when written
// without "=": every flag but the booleans.
func takesValue(name string) bool {
	flag := referenceFlags.Lookup(name)
	return flag != nil && flag.Value.Type() != "bool"
}

var referenceFlags = func() *pflag.FlagSet {
	o := Defaults()
	fs := pflag.NewFlagSet("reference", pflag.ContinueOnError)
	o.AddFlags(fs)
	return fs
}()

// scaled is the integer text s (surrounding spaces allowed) times unit.
func scaled(s string, unit int64) *big.Int {
	n, ok := new(big.Int).SetString(strings.TrimSpace(s), 10)
	if !ok {
		return big.NewInt(math.MaxInt64) // unreachable for a range the flag set accepted
	}
	return n.Mul(n, big.NewInt(unit))
}
