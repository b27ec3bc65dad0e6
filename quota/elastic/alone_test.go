package elastic

import "testing"

func TestAdmitAloneIgnoresUsage(t *testing.T) {
	// root max 10; a: min 2 max 6; b: min 2 max 10.
	tree := mustBuild(t, flatTree("cpu", "10", [3]string{"a", "2", "6"}, [3]string{"b", "2", "10"}))
	tree.AddRequests("running", "b", cpu("8"))
	for _, tc := range []struct {
		namespace, cpu string
		admitted       bool
		node           string
	}{
		{namespace: "a", cpu: "6", admitted: true},
		{namespace: "a", cpu: "8", node: "a"},
		{namespace: "b", cpu: "10", admitted: true},
		{namespace: "b", cpu: "11", node: "b"},
		{namespace: "nobody", cpu: "1000", admitted: true},
	} {
		v := tree.AdmitAlone(tc.namespace, cpu(tc.cpu))
		if v.Admitted() != tc.admitted || (!tc.admitted && v.Excesses[0].Node != tc.node) {
			t.Errorf("AdmitAlone(%s, cpu %s) = %+v, want admitted %v at %q", tc.namespace, tc.cpu, v, tc.admitted, tc.node)
		}
	}
	// The same requests against the usage: b's 8 cpu stand in the way.
	if v := tree.Admit("a", cpu("6")); v.Admitted() {
		t.Error("Admit(a, 6) admitted past the root's max with b using 8; the test tree is not what it says")
	}
}

// TestAdmitBesidesAgreesWithAScratch: admitting besides held room is the
// same verdict as releasing it on a scratch copy and admitting there.
func TestAdmitBesidesAgreesWithAScratch(t *testing.T) {
	tree := mustBuild(t, flatTree("cpu", "10", [3]string{"a", "2", "8"}, [3]string{"b", "2", "10"}))
	tree.AddRequests("reservation", "a", cpu("6"))
	tree.AddRequests("running", "b", cpu("3"))
	for _, tc := range []struct{ request, held string }{
		{"2", "6"}, {"6", "6"}, {"7", "6"}, {"2", "0"}, {"1", "0"}, {"2", "1"}, {"8", "8"},
	} {
		got := tree.AdmitBesides("a", cpu(tc.request), cpu(tc.held))
		scratch := tree.Scratch()
		scratch.Release("a", cpu(tc.held))
		want := scratch.Admit("a", cpu(tc.request))
		if got.Admitted() != want.Admitted() || got.Message() != want.Message() {
			t.Errorf("request %s besides %s: %+v, a scratch says %+v", tc.request, tc.held, got, want)
		}
	}
}
