package expander

import (
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestWasteScore(t *testing.T) {
	initHeavy := pod("1", "")
	initHeavy.Spec.InitContainers = []corev1.Container{{
		Name: "init",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"),
		}},
	}}
	tests := []struct {
		name   string
		option Option
		// want is num/den, the exact idle cpu fraction plus idle memory fraction.
		num, den int64
	}{
		{name: "one node, a quarter used", option: opt("a", 1, node("4", "8Gi"), pod("1", "2Gi")), num: 3, den: 2},
		{name: "two nodes share the requests", option: opt("a", 2, node("2", "4Gi"), pod("1", "2Gi"), pod("1", "2Gi"), pod("1", "2Gi")), num: 1, den: 2},
		{name: "millicores and bytes", option: opt("a", 1, node("1500m", "3Gi"), pod("500m", "1Gi")), num: 4, den: 3},
		{name: "exact fit wastes nothing", option: opt("a", 2, node("2", "2Gi"), pod("2", "2Gi"), pod("2", "2Gi")), num: 0, den: 1},
		{name: "over-request goes negative, as upstream", option: opt("a", 1, node("1", "1Gi"), pod("2", "512Mi")), num: -1, den: 2},
		{name: "pods without requests waste everything", option: opt("a", 1, node("1", "1Gi"), pod("", "")), num: 2, den: 1},
		{name: "no allocatable cpu counts as fully wasted cpu", option: opt("a", 1, node("", "4Gi"), pod("", "1Gi")), num: 7, den: 4},
		{name: "zero allocatable memory counts as fully wasted memory", option: opt("a", 1, node("2", "0"), pod("1", "")), num: 3, den: 2},
		{name: "no template", option: opt("a", 1, nil, pod("1", "1Gi")), num: 2, den: 1},
		{name: "no nodes", option: opt("a", 0, node("1", "1Gi"), pod("1", "1Gi")), num: 2, den: 1},
		{name: "init containers count, via the scheduler's pod requests", option: opt("a", 1, node("4", "1Gi"), initHeavy), num: 3, den: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := wasteScore(&tc.option, requestMemo{})
			if want := big.NewRat(tc.num, tc.den); got.Cmp(want) != 0 {
				t.Errorf("wasteScore() = %s, want %s", got.RatString(), want.RatString())
			}
		})
	}
}

func TestLeastWaste(t *testing.T) {
	tests := []struct {
		name    string
		options []Option
		want    []string
	}{
		{name: "no options", options: nil, want: nil},
		{name: "one option", options: []Option{opt("a", 1, nil)}, want: []string{"a"}},
		{
			name: "the tighter fit wins",
			options: []Option{
				opt("big", 1, node("16", "64Gi"), pod("2", "4Gi")),
				opt("small", 1, node("4", "8Gi"), pod("2", "4Gi")),
				opt("medium", 1, node("8", "16Gi"), pod("2", "4Gi")),
			},
			want: []string{"small"},
		},
		{
			name: "several small nodes can beat one big node",
			options: []Option{
				opt("one-big", 1, node("8", "32Gi"), pod("3", "3Gi"), pod("3", "3Gi")),
				opt("three-small", 3, node("2", "2Gi"), pod("3", "3Gi"), pod("3", "3Gi")),
			},
			want: []string{"three-small"},
		},
		{
			name: "equal waste ties, kept in input order",
			options: []Option{
				opt("b", 1, node("4", "8Gi"), pod("2", "4Gi")),
				opt("a", 2, node("2", "4Gi"), pod("2", "4Gi")),
			},
			want: []string{"b", "a"},
		},
		{
			// In float64 0.1+0.2 > 0.3, which would wrongly pick "b" alone.
			name: "ties are exact, not float-rounded",
			options: []Option{
				opt("a", 1, node("10", "10Gi"), pod("7", "10Gi")), // 3/10 + 0
				opt("b", 1, node("10", "10Gi"), pod("9", "8Gi")),  // 1/10 + 2/10
			},
			want: []string{"a", "b"},
		},
		{
			name: "allocatable, not capacity, is measured",
			options: []Option{
				opt("a", 1, node("2", "2Gi"), pod("1", "1Gi")),
				opt("b", 1, node("4", "4Gi"), pod("1", "1Gi")),
			},
			want: []string{"a"},
		},
		{
			name: "a template without allocatable loses to a real fit",
			options: []Option{
				opt("blank", 1, node("", ""), pod("1", "1Gi")),
				opt("real", 1, node("32", "128Gi"), pod("1", "1Gi")),
			},
			want: []string{"real"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := leastWaste{}.BestOptions(tc.options)
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("BestOptions() ids (-want +got):\n%s", diff)
			}
		})
	}
}
