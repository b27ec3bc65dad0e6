package alerts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

const chartDir = repoRoot + "/charts/quotascale"

// renderRuleFile renders the chart's PrometheusRule with valuesYAML, through
// the Helm library as `helm template` does, and writes its spec to a rule file
// for Prometheus' engine. It returns the file's path.
func renderRuleFile(t *testing.T, valuesYAML string) string {
	t.Helper()
	out, err := renderPrometheusRule(valuesYAML)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &rule); err != nil {
		t.Fatalf("the rendered PrometheusRule: %v\n%s", err, out)
	}
	spec, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// renderPrometheusRule renders templates/prometheusrule.yaml with valuesYAML
// over the chart's defaults.
func renderPrometheusRule(valuesYAML string) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", err
	}
	vals, err := chartutil.ReadValues([]byte(valuesYAML))
	if err != nil {
		return "", err
	}
	opts := chartutil.ReleaseOptions{Name: "quotascale", Namespace: "quotascale-system", Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return "", err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, renderValues)
	if err != nil {
		return "", err
	}
	return files["quotascale/templates/prometheusrule.yaml"], nil
}

// rulesWithProvider are values that render the chart at all: a cloud
// provider, and the PrometheusRule on.
const rulesWithProvider = `
autoscaler:
  cloudProvider: clusterapi
monitoring:
  prometheusRule:
    enabled: true
`

// TestChartRenderedRulesAreTheFile: with no tuning, the chart's rules are the
// file's, evaluated alike, with runbook links pinned to the chart's app
// version rather than to a branch that moves.
func TestChartRenderedRulesAreTheFile(t *testing.T) {
	path := renderRuleFile(t, rulesWithProvider)
	rendered, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	pinned := strings.ReplaceAll(string(file), "/blob/main/", "/blob/"+ch.Metadata.AppVersion+"/")
	if err := yaml.Unmarshal([]byte(pinned), &want); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rendered, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered rules differ from %s with pinned runbooks (-want +got):\n%s", ruleFile, diff)
	}
}

// TestChartTunedRules: an alert switched off never fires, another's `for`
// and severity are the values', every alert carries the additional labels,
// and the runbooks are where the values say; Prometheus' engine evaluates the
// rendered rules.
func TestChartTunedRules(t *testing.T) {
	path := renderRuleFile(t, rulesWithProvider+`
    runbookBaseURL: https://runbooks.example.com/quota
    additionalAlertLabels: {team: platform}
    alerts:
      ScaleUpBlockedByCapacityQuota: {enabled: false}
      CapacityQuotaInvalid: {for: 10m, severity: info, labels: {pager: "no"}}
`)
	tuned := func(quota string) map[string]string {
		return map[string]string{"alertname": "CapacityQuotaInvalid", "severity": "info", "quota": quota, "team": "platform", "pager": "no"}
	}
	// A quota invalid for 12 minutes, and blocked scale-ups all along, under
	// an autoscaler whose loops run every minute.
	load := `
load 1m
  cluster_autoscaler_last_activity{activity="main",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x16
  cluster_autoscaler_last_activity{activity="mainSuccessful",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x16
  quotascale_capacity_quota_valid{quota="bad-selector",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x11 1x5
  quotascale_capacity_quota_scale_up_blocked_total{quota="q",resource="cpu",node_group="ng",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+1x16
`
	checkpoints := []at{
		{At: 5 * time.Minute, Alerts: []alert{{State: pending, Labels: tuned("bad-selector")}}},
		{At: 9 * time.Minute, Alerts: []alert{{State: pending, Labels: tuned("bad-selector")}}},
		{At: 10 * time.Minute, Alerts: []alert{{State: firing, Labels: tuned("bad-selector"), Annotations: map[string]string{
			"runbook_url": "https://runbooks.example.com/quota/capacity-quota-invalid.md"}}}},
		{At: 13 * time.Minute},
	}
	got := evaluateRules(t, path, load, checkpoints)
	for i, c := range checkpoints {
		want := c.Alerts
		if diff := cmp.Diff(want, keepAnnotations(got[i], want)); diff != "" {
			t.Errorf("at %s (-want +got):\n%s", c.At, diff)
		}
	}
}

// keepAnnotations drops from got the annotations want does not name, so that
// a checkpoint states only what it checks.
func keepAnnotations(got, want []alert) []alert {
	if len(got) == 0 {
		return nil
	}
	out := make([]alert, len(got))
	for i, a := range got {
		out[i] = alert{State: a.State, Labels: a.Labels}
		if i < len(want) && want[i].Annotations != nil {
			out[i].Annotations = map[string]string{}
			for k := range want[i].Annotations {
				out[i].Annotations[k] = a.Annotations[k]
			}
		}
	}
	return out
}

// TestChartRuleValuesBadInput: tuning an alert the chart does not have, or
// a negative `for`, fails the render with a message naming the key.
func TestChartRuleValuesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, values, want string
	}{
		{"an unknown alert", "    alerts: {CapacityQuotaMissing: {enabled: false}}\n", "monitoring.prometheusRule.alerts.CapacityQuotaMissing: there is no such alert"},
		{"a negative for", "    alerts: {CapacityQuotaInvalid: {for: -5m}}\n", "/monitoring/prometheusRule/alerts/CapacityQuotaInvalid/for"},
		{"an unknown severity", "    alerts: {CapacityQuotaInvalid: {severity: page}}\n", "/monitoring/prometheusRule/alerts/CapacityQuotaInvalid/severity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderPrometheusRule(rulesWithProvider + tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
