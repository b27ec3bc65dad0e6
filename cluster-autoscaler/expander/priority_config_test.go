package expander

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tierView is a priorityConfig in a form cmp can diff.
type tierView struct {
	Priority int
	Patterns []string
}

func view(c *priorityConfig) []tierView {
	if c == nil {
		return nil
	}
	out := make([]tierView, 0, len(c.tiers))
	for _, tier := range c.tiers {
		v := tierView{Priority: tier.priority, Patterns: []string{}}
		for _, re := range tier.patterns {
			v.Patterns = append(v.Patterns, re.String())
		}
		out = append(out, v)
	}
	return out
}

func TestParsePriorities(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []tierView
		wantErr string // substring; "" means success
		wantIs  error
	}{
		{
			name: "upstream's example",
			data: "10:\n  - .*t2\\.large.*\n  - .*t3\\.large.*\n50:\n  - .*m4\\.4xlarge.*\n",
			want: []tierView{
				{Priority: 50, Patterns: []string{`.*m4\.4xlarge.*`}},
				{Priority: 10, Patterns: []string{`.*t2\.large.*`, `.*t3\.large.*`}},
			},
		},
		{
			name: "many priorities sort highest first",
			data: "1: [a]\n30: [b]\n20: [c]\n-5: [d]\n0: [e]\n",
			want: []tierView{
				{Priority: 30, Patterns: []string{"b"}},
				{Priority: 20, Patterns: []string{"c"}},
				{Priority: 1, Patterns: []string{"a"}},
				{Priority: 0, Patterns: []string{"e"}},
				{Priority: -5, Patterns: []string{"d"}},
			},
		},
		{
			name: "quoted keys are integers too",
			data: "\"10\":\n  - spot-.*\n",
			want: []tierView{{Priority: 10, Patterns: []string{"spot-.*"}}},
		},
		{
			name: "a priority without expressions is allowed beside others",
			data: "10:\n20:\n  - x\n",
			want: []tierView{{Priority: 20, Patterns: []string{"x"}}, {Priority: 10, Patterns: []string{}}},
		},
		{name: "empty", data: "", wantIs: errEmptyPriorities, wantErr: "empty"},
		{name: "only whitespace", data: " \n\t\n", wantIs: errEmptyPriorities, wantErr: "empty"},
		{name: "no expressions at all", data: "{}", wantErr: "no node group expressions"},
		{name: "null", data: "null", wantErr: "no node group expressions"},
		{name: "only empty lists", data: "10:\n20: []\n", wantErr: "no node group expressions"},
		{name: "not YAML", data: "10: [a\n", wantErr: "parsing priorities YAML"},
		{name: "a list, not a map", data: "- a\n", wantErr: "parsing priorities YAML"},
		{name: "non-integer priority", data: "high:\n  - a\n", wantErr: "parsing priorities YAML"},
		{name: "fractional priority", data: "1.5:\n  - a\n", wantErr: "parsing priorities YAML"},
		{name: "expressions not in a list", data: "10: a\n", wantErr: "parsing priorities YAML"},
		{name: "a priority listed twice", data: "10:\n  - a\n10:\n  - b\n", wantErr: "already set"},
		{name: "bad regexp", data: "10:\n  - ok\n  - \"(unclosed\"\n", wantErr: `priority 10, expression "(unclosed"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePriorities(tc.data)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parsePriorities() error = %v", err)
				}
				if diff := cmp.Diff(tc.want, view(got)); diff != "" {
					t.Errorf("parsePriorities() (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parsePriorities() error = %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("parsePriorities() error = %v, want errors.Is %v", err, tc.wantIs)
			}
			if got != nil {
				t.Errorf("parsePriorities() = %v alongside an error", view(got))
			}
		})
	}
}

func TestParsePrioritiesReportsTheHighestBadExpression(t *testing.T) {
	for range 20 { // map iteration order varies between runs
		_, err := parsePriorities("1: [\"(\"]\n9: [\"[\"]\n5: [\"*\"]\n")
		if err == nil || !strings.HasPrefix(err.Error(), "priority 9,") {
			t.Fatalf("parsePriorities() error = %v, want the one at priority 9", err)
		}
	}
}

func TestParsePrioritiesWrapsRegexpError(t *testing.T) {
	_, err := parsePriorities("5:\n  - \"a[\"\n")
	var syntaxErr *syntax.Error
	if !errors.As(err, &syntaxErr) {
		t.Fatalf("parsePriorities() error = %v, want it to wrap a *syntax.Error", err)
	}
}

func TestPriorityRank(t *testing.T) {
	config, err := parsePriorities("50:\n  - m4\n10:\n  - large\n  - ^t3\n-1:\n  - spot\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id   string
		want int
	}{
		{id: "asg-m4.large", want: 0},  // matches 50 and 10: the higher wins
		{id: "asg-t2.large", want: 1},  // unanchored, as upstream
		{id: "t3-medium", want: 1},     // anchors work when written
		{id: "asg-t3-medium", want: 3}, // ...and so exclude
		{id: "spot-pool", want: 2},     // a negative priority still ranks above no match
		{id: "", want: 3},
	}
	for _, tc := range tests {
		if got := config.rank(tc.id); got != tc.want {
			t.Errorf("rank(%q) = %d, want %d", tc.id, got, tc.want)
		}
	}
}

// FuzzParsePriorities checks that no ConfigMap content can crash the autoscaler,
// and that whatever parses is usable: tiers strictly descending, every pattern
// compiled.
func FuzzParsePriorities(f *testing.F) {
	for _, seed := range []string{
		"",
		"10:\n  - .*t2\\.large.*\n50:\n  - .*m4\\.4xlarge.*\n",
		"1: [a]\n-1: [b]\n",
		"\"10\": [x]",
		"10:\n  - \"(\"\n",
		"10:\n  - a\n10:\n  - b\n",
		"{}",
		"- a",
		"~: [a]",
		"0x10: ['[[:alpha:]]+']",
		"9223372036854775807: [a]\n-9223372036854775808: [b]\n",
		"&a [x]: *a",
	} {
		f.Add(seed, "asg-t2.large")
	}
	f.Fuzz(func(t *testing.T, data, id string) {
		config, err := parsePriorities(data)
		if err != nil {
			if config != nil {
				t.Fatalf("parsePriorities(%q) returned a config alongside error %v", data, err)
			}
			return
		}
		for i, tier := range config.tiers {
			if i > 0 && tier.priority >= config.tiers[i-1].priority {
				t.Fatalf("parsePriorities(%q): tiers not strictly descending: %v", data, view(config))
			}
			for _, re := range tier.patterns {
				if re == nil {
					t.Fatalf("parsePriorities(%q): nil pattern at priority %d", data, tier.priority)
				}
			}
		}
		if r := config.rank(id); r < 0 || r > len(config.tiers) {
			t.Fatalf("rank(%q) = %d, outside [0, %d]", id, r, len(config.tiers))
		}
	})
}
