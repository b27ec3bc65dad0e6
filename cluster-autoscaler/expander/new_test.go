package expander

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

func TestNewRejects(t *testing.T) {
	deps := Deps{PriorityConfig: staticConfig(testPriorities, true, nil)}
	tests := []struct {
		name    string
		spec    string
		deps    Deps
		wantErr string
		wantIs  error
	}{
		{
			name:    "unknown name",
			spec:    "foo",
			deps:    deps,
			wantErr: `unknown expander "foo": valid expanders are least-waste, most-pods, priority, random`,
			wantIs:  ErrUnknownExpander,
		},
		{
			name:    "unknown name later in the chain",
			spec:    "priority,price",
			deps:    deps,
			wantErr: `unknown expander "price": valid expanders are least-waste, most-pods, priority, random`,
			wantIs:  ErrUnknownExpander,
		},
		{
			name:    "an empty element",
			spec:    "priority,,least-waste",
			deps:    deps,
			wantErr: `unknown expander "": valid expanders are least-waste, most-pods, priority, random`,
			wantIs:  ErrUnknownExpander,
		},
		{
			name:    "names are case-sensitive, as upstream",
			spec:    "Random",
			deps:    deps,
			wantErr: `unknown expander "Random"`,
			wantIs:  ErrUnknownExpander,
		},
		{
			name:    "a name twice",
			spec:    "most-pods,least-waste,most-pods",
			deps:    deps,
			wantErr: `expander "most-pods" appears twice in "most-pods,least-waste,most-pods"`,
		},
		{
			name:    "a stage after random",
			spec:    "random,least-waste",
			deps:    deps,
			wantErr: `expander "least-waste" follows "random" in "random,least-waste" and would never run`,
		},
		{
			name:    "priority without a config source",
			spec:    "least-waste,priority",
			deps:    Deps{},
			wantErr: `expander "priority" needs Deps.PriorityConfig`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(context.Background(), tc.spec, tc.deps)
			if err == nil {
				t.Fatalf("New(%q) = %T, want an error", tc.spec, s)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New(%q) error = %q, want it to contain %q", tc.spec, err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("New(%q) error = %v, want errors.Is %v", tc.spec, err, tc.wantIs)
			}
		})
	}
}

func TestChains(t *testing.T) {
	// Each stage ranks these differently. Waste: tight and micro 0, loose 5/4,
	// big 113/64. Pods: loose and big 3, tight 2, micro 1.
	tight := opt("asg.t2.large", 1, node("2", "4Gi"), pod("1", "2Gi"), pod("1", "2Gi"))
	loose := opt("asg.t3.large", 1, node("8", "16Gi"), pod("1", "2Gi"), pod("1", "2Gi"), pod("1", "2Gi"))
	big := opt("asg.m4.4xlarge", 1, node("16", "64Gi"), pod("1", "1Gi"), pod("1", "1Gi"), pod("1", "1Gi"))
	micro := opt("asg.t2.micro", 1, node("1", "1Gi"), pod("1", "1Gi"))
	twoPriorities := "10:\n  - t2\\.large\n  - t3\\.large\n5:\n  - .*\n"

	tests := []struct {
		name    string
		spec    string
		config  string
		options []Option
		want    string
	}{
		{name: "no options", spec: "priority,least-waste", config: twoPriorities, options: nil, want: "<nil>"},
		{name: "one option skips every stage", spec: "most-pods", options: []Option{big}, want: "asg.m4.4xlarge"},
		{name: "empty spec is least-waste", spec: "", options: []Option{loose, tight, big}, want: "asg.t2.large"},
		{name: "blank spec is least-waste", spec: "  ", options: []Option{loose, tight, big}, want: "asg.t2.large"},
		{name: "least-waste ties go to the lowest id", spec: "least-waste", options: []Option{tight, micro}, want: "asg.t2.large"},
		{name: "most-pods ties go to the lowest id", spec: "most-pods", options: []Option{loose, big, tight}, want: "asg.m4.4xlarge"},
		{name: "priority ties go to the lowest id", spec: "priority", config: twoPriorities, options: []Option{tight, loose, big}, want: "asg.t2.large"},
		{name: "priority then least-waste", spec: "priority,least-waste", config: "10:\n  - t3\\.large\n  - m4\n", options: []Option{tight, big, loose}, want: "asg.t3.large"},
		{name: "priority then most-pods then least-waste", spec: "priority,most-pods,least-waste", config: twoPriorities, options: []Option{micro, big, tight, loose}, want: "asg.t3.large"},
		{name: "order matters: least-waste first", spec: "least-waste,most-pods", options: []Option{micro, big, tight, loose}, want: "asg.t2.large"},
		{name: "order matters: most-pods first", spec: "most-pods,least-waste", options: []Option{micro, big, tight, loose}, want: "asg.t3.large"},
		{name: "spaces around names are ignored", spec: " priority , least-waste ", config: "10:\n  - t3\\.large\n  - m4\n", options: []Option{big, loose}, want: "asg.t3.large"},
		{name: "malformed priorities fall through to the next stage", spec: "priority,most-pods", config: "10: [", options: []Option{tight, micro}, want: "asg.t2.large"},
		{name: "malformed priorities alone fall through to the id", spec: "priority", config: "10: [", options: []Option{loose, big, micro}, want: "asg.m4.4xlarge"},
		{name: "an option without a group does not crash", spec: "priority,least-waste", config: twoPriorities, options: []Option{{NodeCount: 1}, micro}, want: "asg.t2.micro"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s, err := New(ctx, tc.spec, Deps{PriorityConfig: staticConfig(tc.config, true, nil)})
			if err != nil {
				t.Fatalf("New(%q) error = %v", tc.spec, err)
			}
			before := ids(tc.options)
			got := s.BestOption(tc.options)
			if diff := cmp.Diff(tc.want, idOf(got)); diff != "" {
				t.Errorf("BestOption() id (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, ids(tc.options)); diff != "" {
				t.Errorf("BestOption() reordered its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRandomChains(t *testing.T) {
	options := []Option{withPods("a", 1), withPods("b", 1), withPods("c", 1), withPods("d", 1)}
	config := staticConfig("10:\n  - ^[abc]$\n", true, nil)
	run := func(spec string, r *rand.Rand) []string {
		s, err := New(context.Background(), spec, Deps{PriorityConfig: config, Rand: r})
		if err != nil {
			t.Fatalf("New(%q) error = %v", spec, err)
		}
		var out []string
		for range 40 {
			out = append(out, idOf(s.BestOption(options)))
		}
		return out
	}

	for _, spec := range []string{"random", "priority,random", "most-pods,random"} {
		t.Run(spec, func(t *testing.T) {
			first := run(spec, rand.New(rand.NewPCG(42, 42)))
			if diff := cmp.Diff(first, run(spec, rand.New(rand.NewPCG(42, 42)))); diff != "" {
				t.Errorf("same seed, different choices (-first +second):\n%s", diff)
			}
			seen := map[string]bool{}
			for _, id := range first {
				seen[id] = true
			}
			if len(seen) < 2 {
				t.Errorf("40 random choices all went to %v; random is not breaking ties", seen)
			}
			if spec == "priority,random" && seen["d"] {
				t.Errorf("random chose %q, which priority had already dropped", "d")
			}
		})
	}

	t.Run("nil Rand is seeded for us", func(t *testing.T) {
		for _, id := range run("random", nil) {
			if id == "<nil>" {
				t.Fatal("BestOption() = nil with options given")
			}
		}
	})
}

func TestNewLogsThroughTheContextLogger(t *testing.T) {
	logger, logged := testLogger(t)
	ctx := klog.NewContext(context.Background(), logger)
	s, err := New(ctx, "priority,least-waste", Deps{PriorityConfig: staticConfig("10: [", true, nil)})
	if err != nil {
		t.Fatal(err)
	}
	s.BestOption([]Option{withPods("a", 1), withPods("b", 1)})
	if lines := logged(); len(lines) != 1 || !strings.HasPrefix(lines[0], "ERROR ") {
		t.Errorf("logged %q, want one error line on the context's logger", lines)
	}
}
