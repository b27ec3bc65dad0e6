package gang

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"
)

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestSplitMembers: the tree admits the first MinCount members as one and
// each member past them alone, so that the autoscaler buys nodes for the pods
// the tree admits and no more.
func TestSplitMembers(t *testing.T) {
	isBound := func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }
	bound := func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = "node-1"; return p }
	pending := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			out = append(out, newPod(fmt.Sprintf("m%d", i), "3"))
		}
		return out
	}
	type split struct {
		Unit    []string
		Missing int
		Past    []string
		Whole   bool
	}
	for _, tc := range []struct {
		name     string
		minCount int32
		members  []*corev1.Pod
		want     split
	}{
		{name: "ten pending, min 2: two as one, eight alone", minCount: 2, members: pending(10),
			want: split{Unit: []string{"m0", "m1"}, Past: []string{"m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"}}},
		{name: "one of the first two bound: one more as the unit", minCount: 2,
			members: append([]*corev1.Pod{bound(newPod("b", "3"))}, pending(3)...),
			want:    split{Unit: []string{"m0"}, Past: []string{"m1", "m2"}}},
		{name: "fewer than min: the unit lacks the rest", minCount: 4, members: pending(3),
			want: split{Unit: []string{"m0", "m1", "m2"}, Missing: 1}},
		{name: "the first min bound: whole, every other alone", minCount: 2,
			members: append([]*corev1.Pod{bound(newPod("a", "3")), bound(newPod("b", "3"))}, pending(2)...),
			want:    split{Past: []string{"m0", "m1"}, Whole: true}},
		{name: "a non-positive min is whole", minCount: 0, members: pending(1),
			want: split{Past: []string{"m0"}, Whole: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SplitMembers(Gang{MinCount: tc.minCount}, tc.members, isBound)
			got := split{Unit: names(s.Unit), Missing: s.Missing, Past: names(s.Past), Whole: s.Whole()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SplitMembers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSplitMembersProperty checks SplitMembers against its definition over
// arbitrary gangs: the uncharged members in order are the unit then the
// members past it; the unit and its missing members are MinCount less the
// charged among the first MinCount; members past it exist only when the
// unit is complete.
func TestSplitMembersProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		minCount := rapid.Int32Range(-2, 12).Draw(t, "minCount")
		charged := rapid.SliceOfN(rapid.Bool(), 0, 15).Draw(t, "charged")
		members := make([]*corev1.Pod, len(charged))
		isCharged := map[*corev1.Pod]bool{}
		var uncharged []string
		need := int(max(minCount, 0))
		for i, c := range charged {
			members[i] = newPod(fmt.Sprintf("m%d", i), "1")
			isCharged[members[i]] = c
			switch {
			case !c:
				uncharged = append(uncharged, members[i].Name)
			case i < int(max(minCount, 0)):
				need--
			}
		}
		s := SplitMembers(Gang{MinCount: minCount}, members, func(p *corev1.Pod) bool { return isCharged[p] })
		if diff := cmp.Diff(uncharged, append(names(s.Unit), names(s.Past)...)); diff != "" {
			t.Fatalf("unit then past are not the uncharged members in order (-want +got):\n%s", diff)
		}
		if got := len(s.Unit) + s.Missing; got != max(need, 0) {
			t.Fatalf("unit of %d and %d missing, want %d in all", len(s.Unit), s.Missing, max(need, 0))
		}
		if s.Missing > 0 && len(s.Past) > 0 {
			t.Fatalf("%d members past a unit that lacks %d", len(s.Past), s.Missing)
		}
		if s.Whole() != (need <= 0) {
			t.Fatalf("Whole = %v with %d still to admit", s.Whole(), need)
		}
	})
}
