package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestVariables: Grafana's substitution of a dashboard's variables, at All
// and at the values it opens with, regex-escaped as its Prometheus data
// source sends them.
func TestVariables(t *testing.T) {
	d, err := Parse([]byte(`{"templating": {"list": [
	  {"name": "all_default", "allValue": ".*", "current": {"text": "All", "value": "$__all"}},
	  {"name": "all_list", "current": {"value": ["$__all"]}},
	  {"name": "one", "current": {"value": ["nvidia.com/gpu"]}},
	  {"name": "one_string", "current": {"value": "cpu"}},
	  {"name": "several", "current": {"value": ["cpu", "memory"]}}
	]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{
		"all_default": ".*", "all_list": ".*", "one": `nvidia\\.com/gpu`, "one_string": "cpu", "several": "(cpu|memory)",
	}, d.Opened()); diff != "" {
		t.Errorf("Opened (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{
		"all_default": ".*", "all_list": ".*", "one": ".*", "one_string": ".*", "several": ".*",
	}, d.AllSelected()); diff != "" {
		t.Errorf("AllSelected (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ in, want string }{
		{`m{r=~"$several", q=~"${one}"}`, `m{r=~"(cpu|memory)", q=~"nvidia\\.com/gpu"}`},
		{`rate(m[$__rate_interval])`, `rate(m[20s])`},
		{`m{r=~"$unknown"}`, `m{r=~"$unknown"}`},
	} {
		if got := Expand(tc.in, d.Opened(), 20*time.Second); got != tc.want {
			t.Errorf("Expand(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// The escaped value reaches Prometheus as a regex that matches only itself.
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(Expand(`m{q=~"$one"}`, d.Opened(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m := expr.(*parser.VectorSelector).LabelMatchers[0]
	if !m.Matches("nvidia.com/gpu") || m.Matches("nvidiaXcom/gpu") {
		t.Errorf("matcher %s does not select exactly nvidia.com/gpu", m)
	}
	legend := Legend("{{quota}} {{ resource }} {{missing}}", func(l string) string {
		return map[string]string{"quota": "q", "resource": "cpu"}[l]
	})
	if legend != "q cpu" {
		t.Errorf("Legend = %q, want %q", legend, "q cpu")
	}
}
