package expander

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

const testPriorities = `
5:
  - ".*t2\\.micro.*"
10:
  - ".*t2\\.large.*"
  - ".*t3\\.large.*"
50:
  - ".*m4\\.4xlarge.*"
`

var (
	t2Micro   = withPods("asg.t2.micro", 1)
	t2Large   = withPods("asg.t2.large", 1)
	t3Large   = withPods("asg.t3.large", 1)
	m44xLarge = withPods("asg.m4.4xlarge", 1)
	c5Large   = withPods("asg.c5.large", 1)
)

// testLogger logs to t and returns what it logged, one string per line (message,
// error and key/values).
func testLogger(t *testing.T) (klog.Logger, func() []string) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	return logger, func() []string {
		var lines []string
		for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
			lines = append(lines, fmt.Sprintf("%s %s: %v %v", e.Type, e.Message, e.Err, e.ParameterKVList))
		}
		return lines
	}
}

func TestPriority(t *testing.T) {
	tests := []struct {
		name     string
		source   func() (string, bool, error)
		options  []Option
		want     []string
		wantLogs []string // substrings, one per expected log line
	}{
		{
			name:    "no options",
			source:  staticConfig(testPriorities, true, nil),
			options: nil,
			want:    nil,
		},
		{
			name:    "single matching option",
			source:  staticConfig(testPriorities, true, nil),
			options: []Option{t2Large},
			want:    []string{"asg.t2.large"},
		},
		{
			name:    "highest priority wins",
			source:  staticConfig(testPriorities, true, nil),
			options: []Option{t2Large, m44xLarge, t2Micro},
			want:    []string{"asg.m4.4xlarge"},
		},
		{
			name:    "groups sharing the highest priority all stay",
			source:  staticConfig(testPriorities, true, nil),
			options: []Option{t3Large, t2Micro, t2Large},
			want:    []string{"asg.t3.large", "asg.t2.large"},
		},
		{
			name:    "unmatched groups rank below every match",
			source:  staticConfig(testPriorities, true, nil),
			options: []Option{c5Large, t2Micro},
			want:    []string{"asg.t2.micro"},
		},
		{
			name:    "unmatched groups rank below negative priorities too",
			source:  staticConfig("-10:\n  - micro\n", true, nil),
			options: []Option{c5Large, t2Micro},
			want:    []string{"asg.t2.micro"},
		},
		{
			name:    "nothing matches: every option stays, silently",
			source:  staticConfig(testPriorities, true, nil),
			options: []Option{c5Large, withPods("asg.r5.large", 1)},
			want:    []string{"asg.c5.large", "asg.r5.large"},
		},
		{
			name:    "a wildcard at low priority does not beat a specific higher one",
			source:  staticConfig("5:\n  - .*\n10:\n  - t2\\.large\n", true, nil),
			options: []Option{t2Micro, t2Large},
			want:    []string{"asg.t2.large"},
		},
		{
			name:     "missing ConfigMap keeps every option",
			source:   staticConfig("", false, nil),
			options:  []Option{t2Micro, m44xLarge},
			want:     []string{"asg.t2.micro", "asg.m4.4xlarge"},
			wantLogs: []string{"not found"},
		},
		{
			name:     "lister error keeps every option",
			source:   staticConfig("", false, errors.New("cache not synced")),
			options:  []Option{t2Micro, m44xLarge},
			want:     []string{"asg.t2.micro", "asg.m4.4xlarge"},
			wantLogs: []string{"cache not synced"},
		},
		{
			name:     "malformed YAML keeps every option",
			source:   staticConfig("10: [unclosed\n", true, nil),
			options:  []Option{t2Micro, m44xLarge},
			want:     []string{"asg.t2.micro", "asg.m4.4xlarge"},
			wantLogs: []string{"parsing priorities YAML"},
		},
		{
			name:     "bad regexp keeps every option",
			source:   staticConfig("10:\n  - \"(\"\n", true, nil),
			options:  []Option{t2Micro, m44xLarge},
			want:     []string{"asg.t2.micro", "asg.m4.4xlarge"},
			wantLogs: []string{`expression "("`},
		},
		{
			name:     "empty configuration keeps every option",
			source:   staticConfig("", true, nil),
			options:  []Option{t2Micro, m44xLarge},
			want:     []string{"asg.t2.micro", "asg.m4.4xlarge"},
			wantLogs: []string{"empty"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, logged := testLogger(t)
			p := &priority{source: tc.source, logger: logger}
			got := p.BestOptions(tc.options)
			lines := logged()
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions() ids (-want +got):\n%s", diff)
			}
			if len(lines) != len(tc.wantLogs) {
				t.Fatalf("logged %q, want %d line(s) containing %q", lines, len(tc.wantLogs), tc.wantLogs)
			}
			for i, want := range tc.wantLogs {
				if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], PriorityConfigMapName) {
					t.Errorf("log line %q, want it to contain %q and the ConfigMap name", lines[i], want)
				}
			}
		})
	}
}

func TestPriorityFollowsConfigChanges(t *testing.T) {
	data := "10:\n  - t2\\.large\n"
	p := &priority{source: func() (string, bool, error) { return data, true, nil }, logger: ktesting.NewLogger(t, ktesting.NewConfig())}
	options := []Option{t2Large, m44xLarge}

	if diff := cmp.Diff([]string{"asg.t2.large"}, ids(p.BestOptions(options))); diff != "" {
		t.Errorf("before the update (-want +got):\n%s", diff)
	}
	data = testPriorities
	if diff := cmp.Diff([]string{"asg.m4.4xlarge"}, ids(p.BestOptions(options))); diff != "" {
		t.Errorf("after the update (-want +got):\n%s", diff)
	}
}

func TestPriorityCachesByContent(t *testing.T) {
	data := testPriorities
	p := &priority{source: func() (string, bool, error) { return data, true, nil }, logger: ktesting.NewLogger(t, ktesting.NewConfig())}

	first, err := p.current()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := p.current()
	if again != first {
		t.Error("unchanged content was parsed again")
	}

	data = "1: [x]"
	changed, _ := p.current()
	if changed == first {
		t.Error("changed content was served from the cache")
	}

	data = "1: ["
	_, err1 := p.current()
	_, err2 := p.current()
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
		t.Errorf("malformed content: errors %v then %v, want the same error twice", err1, err2)
	}

	data = testPriorities
	if back, _ := p.current(); back == nil || back == first {
		t.Errorf("returning to earlier content: got %p, want a fresh parse (cache holds one entry)", back)
	}
}
