package expander

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMostPods(t *testing.T) {
	tests := []struct {
		name    string
		options []Option
		want    []string
	}{
		{name: "no options", options: nil, want: nil},
		{name: "one option", options: []Option{withPods("a", 0)}, want: []string{"a"}},
		{name: "most pods wins", options: []Option{withPods("a", 1), withPods("b", 3), withPods("c", 2)}, want: []string{"b"}},
		{name: "ties kept in input order", options: []Option{withPods("c", 3), withPods("a", 1), withPods("b", 3)}, want: []string{"c", "b"}},
		{name: "all without pods tie", options: []Option{withPods("b", 0), withPods("a", 0)}, want: []string{"b", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mostPods{}.BestOptions(tc.options)
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions() ids (-want +got):\n%s", diff)
			}
		})
	}
}
