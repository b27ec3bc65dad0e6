// The tests of the Grafana dashboard the chart ships
// (charts/quotascale/files/dashboard.json): every PromQL expression in it
// parses with Prometheus' own parser, and every metric and label it names is
// one the binaries export, as a scrape of both taken during an e2e run
// (testdata/scrape.prom, recorded by test/e2e's TestDashboardScrape) shows.
// (Not the package's doc comment: dashboard.go has that.)

package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	dashboardFile = "../../charts/quotascale/files/dashboard.json"
	scrapeFile    = "testdata/scrape.prom"
	runbookPrefix = "https://github.com/quotascale/quotascale/blob/main/"
)

// series maps every series name a scrape holds to the label names its samples
// carry. A histogram family X holds X_bucket (with le), X_sum and X_count; a
// summary X (with quantile), X_sum and X_count.
type series map[string]map[string]bool

func loadScrape(t *testing.T, path string) series {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := series{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			switch fam.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}

func loadDashboard(t *testing.T, data []byte) Dashboard {
	t.Helper()
	d, err := Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// checkRateInterval stands for $__rate_interval: any range parses alike.
const checkRateInterval = 5 * time.Minute

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// check returns every way the dashboard names something the scrape does not
// have, or an expression Prometheus does not parse.
func check(d Dashboard, exported series) []string {
	var problems []string
	p := parser.NewParser(parser.Options{})
	all := d.AllSelected()
	for _, pn := range d.AllPanels() {
		for _, target := range pn.Targets {
			expr, err := p.ParseExpr(Expand(target.Expr, all, checkRateInterval))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%q: %s: %v", pn.Title, target.Expr, err))
				continue
			}
			available, exprProblems := checkExpr(expr, exported)
			for _, msg := range exprProblems {
				problems = append(problems, fmt.Sprintf("%q: %s", pn.Title, msg))
			}
			for _, l := range LegendLabels(target.LegendFormat) {
				if !available[l] {
					problems = append(problems, fmt.Sprintf("%q: legend names label %q that no series of %s has", pn.Title, l, target.Expr))
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			problems = append(problems, fmt.Sprintf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition))
			continue
		}
		if labels, ok := exported[m[1]]; !ok {
			problems = append(problems, fmt.Sprintf("variable %s: no binary exports %s", v.Name, m[1]))
		} else if !labels[m[2]] {
			problems = append(problems, fmt.Sprintf("variable %s: %s has no label %s", v.Name, m[1], m[2]))
		}
	}
	return problems
}

// checkExpr checks every selector, grouping and matching label of expr, and
// returns the labels of the series it selects (what a legend may name).
func checkExpr(expr parser.Expr, exported series) (map[string]bool, []string) {
	var problems []string
	available := map[string]bool{}
	var grouping [][]string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			have, ok := exported[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("no binary exports %s", name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName && !have[m.Name] {
					problems = append(problems, fmt.Sprintf("%s has no label %q", name, m.Name))
				}
			}
			for l := range have {
				available[l] = true
			}
		case *parser.AggregateExpr:
			grouping = append(grouping, n.Grouping)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				grouping = append(grouping, n.VectorMatching.MatchingLabels)
			}
		}
		return nil
	})
	for _, g := range grouping {
		for _, l := range g {
			if !available[l] {
				problems = append(problems, fmt.Sprintf("groups or matches on label %q that no selected series has", l))
			}
		}
	}
	return available, problems
}

func TestDashboardNamesExportedSeries(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := loadDashboard(t, data)
	exported := loadScrape(t, scrapeFile)
	for _, p := range check(d, exported) {
		t.Error(p)
	}
	var exprs int
	for _, p := range d.AllPanels() {
		exprs += len(p.Targets)
	}
	if exprs < 10 {
		t.Errorf("only %d expressions found: the dashboard model read is not Grafana's", exprs)
	}
}

// TestCheckCatchesUnexported: the check fails on a dashboard that names a
// metric, a label or a legend label no binary exports.
func TestCheckCatchesUnexported(t *testing.T) {
	exported := series{
		"quotascale_capacity_quota_used":  {"quota": true, "resource": true},
		"quotascale_capacity_quota_limit": {"quota": true, "resource": true},
	}
	for _, tc := range []struct {
		expr, legend string
		want         []string
	}{
		{`quotascale_capacity_quota_used / quotascale_capacity_quota_limit`, "{{quota}}", nil},
		{`quotascale_capacity_quota_usage`, "", []string{`"p": no binary exports quotascale_capacity_quota_usage`}},
		{`quotascale_capacity_quota_used{node_group="a"}`, "", []string{`"p": quotascale_capacity_quota_used has no label "node_group"`}},
		{`sum by (node_group) (quotascale_capacity_quota_used)`, "", []string{`"p": groups or matches on label "node_group" that no selected series has`}},
		{`quotascale_capacity_quota_used`, "{{quota_node}}", []string{`"p": legend names label "quota_node" that no series of quotascale_capacity_quota_used has`}},
		{`quotascale_capacity_quota_used{`, "", []string{`"p": quotascale_capacity_quota_used{: 1:32: parse error: unexpected end of input inside braces`}},
	} {
		var d Dashboard
		raw := fmt.Sprintf(`{"panels":[{"title":"r","type":"row","panels":[{"title":"p","targets":[{"expr":%q,"legendFormat":%q}]}]}]}`, tc.expr, tc.legend)
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, check(d, exported)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
		}
	}
}

// TestDashboardLinksRunbooks: the dashboard links every runbook, and every
// link it has to the repository names a file that exists.
func TestDashboardLinksRunbooks(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := loadDashboard(t, data)
	linked := map[string]bool{}
	for _, p := range d.AllPanels() {
		for _, l := range p.Links {
			path, ok := strings.CutPrefix(l.URL, runbookPrefix)
			if !ok {
				t.Errorf("panel %q links %s, not a file of the repository", p.Title, l.URL)
				continue
			}
			if _, err := os.Stat("../../" + path); err != nil {
				t.Errorf("panel %q links %s: %v", p.Title, l.URL, err)
			}
			linked[path] = true
		}
	}
	entries, err := os.ReadDir("../../docs/runbooks")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, e := range entries {
		if path := "docs/runbooks/" + e.Name(); !linked[path] {
			missing = append(missing, path)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("runbooks no panel links: %v", missing)
	}
}
