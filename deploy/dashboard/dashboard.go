// Package dashboard reads the Grafana dashboard the chart ships
// (charts/quotascale/files/dashboard.json) the way Grafana does: its panels,
// their PromQL targets, and its variables, substituted into the expressions.
// Its test checks every expression against what the binaries export, and
// hack/dashboardplot draws the panels from recorded metrics.
package dashboard

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Dashboard is the part of Grafana's dashboard model read here.
type Dashboard struct {
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Links []Link `json:"links"`
}

// Panel is a panel, or a row holding panels.
type Panel struct {
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	GridPos GridPos  `json:"gridPos"`
	Panels  []Panel  `json:"panels"`
	Links   []Link   `json:"links"`
	Targets []Target `json:"targets"`
}

// GridPos places a panel on Grafana's grid of 24 columns.
type GridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Target is one PromQL query of a panel.
type Target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// Link is a panel's or the dashboard's link.
type Link struct {
	URL string `json:"url"`
}

// Variable is a templating variable. Current is what the dashboard opens
// with; Grafana saves it as a string or a list of strings.
type Variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Definition string `json:"definition"`
	AllValue   string `json:"allValue"`
	Current    struct {
		Value any `json:"value"`
	} `json:"current"`
}

// Parse reads a dashboard's JSON.
func Parse(data []byte) (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return Dashboard{}, fmt.Errorf("reading the dashboard: %w", err)
	}
	return d, nil
}

// AllPanels lists every panel, rows and the panels inside them, in order.
func (d Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// allValue is Grafana's value for "All" when a variable sets no allValue.
const allValue = ".*"

// AllSelected is every variable set to All.
func (d Dashboard) AllSelected() map[string]string {
	out := map[string]string{}
	for _, v := range d.Templating.List {
		out[v.Name] = v.all()
	}
	return out
}

// Opened is every variable at the value the dashboard opens with, formatted
// as Grafana's Prometheus data source puts it in a regex matcher: All as the
// variable's allValue, values regex-escaped inside the PromQL string, several
// as an alternation.
func (d Dashboard) Opened() map[string]string {
	out := map[string]string{}
	for _, v := range d.Templating.List {
		var values []string
		switch c := v.Current.Value.(type) {
		case string:
			values = []string{c}
		case []any:
			for _, s := range c {
				if s, ok := s.(string); ok {
					values = append(values, s)
				}
			}
		}
		if len(values) == 0 || values[0] == "$__all" {
			out[v.Name] = v.all()
			continue
		}
		// Escaped for the regex, then for the PromQL string it sits in.
		for i := range values {
			values[i] = strings.ReplaceAll(regexp.QuoteMeta(values[i]), `\`, `\\`)
		}
		if len(values) == 1 {
			out[v.Name] = values[0]
		} else {
			out[v.Name] = "(" + strings.Join(values, "|") + ")"
		}
	}
	return out
}

func (v Variable) all() string {
	if v.AllValue != "" {
		return v.AllValue
	}
	return allValue
}

var variableRef = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// Expand substitutes the variables in expr as Grafana does before it sends
// the query: $name and ${name} by values, and $__rate_interval by
// rateInterval. A name it does not know stays as written, which Prometheus'
// parser then refuses.
func Expand(expr string, values map[string]string, rateInterval time.Duration) string {
	return variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		name := strings.Trim(ref, "${}")
		if name == "__rate_interval" {
			return model.Duration(rateInterval).String()
		}
		if v, ok := values[name]; ok {
			return v
		}
		return ref
	})
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// LegendLabels are the label names a legend format names.
func LegendLabels(format string) []string {
	var out []string
	for _, m := range legendLabel.FindAllStringSubmatch(format, -1) {
		out = append(out, m[1])
	}
	return out
}

// Legend is a series' name in a panel: the format with each {{label}}
// replaced by the series' value of it, empty when it has none.
func Legend(format string, label func(name string) string) string {
	return strings.TrimSpace(legendLabel.ReplaceAllStringFunc(format, func(ref string) string {
		return label(legendLabel.FindStringSubmatch(ref)[1])
	}))
}
