// Package alerts tests the Prometheus alerting rules the chart ships
// (charts/quotascale/files/alerts.yaml) with Prometheus' own code: rulefmt
// parses and validates the file, promqltest's LazyLoader feeds synthetic series
// into a test TSDB, and the rules package evaluates the groups minute by minute,
// the same harness `promtool test rules` runs on. promtool itself is a main
// package, so it is neither imported nor executed.
package alerts

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

const (
	// repoRoot is where runbook_url paths are resolved, relative to this package.
	repoRoot = "../.."
	// ruleFile is the file under test, relative to this package.
	ruleFile = repoRoot + "/charts/quotascale/files/alerts.yaml"
	// runbookPrefix is what every runbook_url starts with; the rest is a path
	// from the repository root.
	runbookPrefix = "https://github.com/quotascale/quotascale/blob/main/"
	// evalInterval is Prometheus' default evaluation_interval. The loads below
	// use the same step as their scrape interval, so one sample per evaluation.
	evalInterval = time.Minute
)

// The runbook URL of each alert, spelled out here so that a rename of an
// alert or a runbook shows up in review as a deliberate change.
var wantRunbooks = map[string]string{
	"ScaleUpBlockedByCapacityQuota": runbookPrefix + "docs/runbooks/scale-up-blocked-by-capacity-quota.md",
	"CapacityQuotaInvalid":          runbookPrefix + "docs/runbooks/capacity-quota-invalid.md",
	"CapacityQuotaNearLimit":        runbookPrefix + "docs/runbooks/capacity-quota-near-limit.md",
	"ElasticQuotaTreeInvalid":       runbookPrefix + "docs/runbooks/elastic-quota-tree-invalid.md",
	"ElasticQuotaAtMaxPodsPending":  runbookPrefix + "docs/runbooks/elastic-quota-at-max-pods-pending.md",
	"ElasticQuotaReclaimFailing":    runbookPrefix + "docs/runbooks/elastic-quota-reclaim-failing.md",
	"ClusterAutoscalerNotRunning":   runbookPrefix + "docs/runbooks/cluster-autoscaler-not-running.md",
	"ClusterAutoscalerLoopsFailing": runbookPrefix + "docs/runbooks/cluster-autoscaler-loops-failing.md",
	"ClusterAutoscalerDataStale":    runbookPrefix + "docs/runbooks/cluster-autoscaler-data-stale.md",
}

// newParser is the parser Prometheus uses when no feature flag is set, so the
// rules are checked against what a stock server accepts.
func newParser() parser.Parser { return parser.NewParser(parser.Options{}) }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestRuleFile checks the file the way `promtool check rules` does (strict
// YAML, valid PromQL, templates that parse) and the conventions every alert
// here follows: a known severity, summary and description, and a runbook_url
// whose file exists in this repository.
func TestRuleFile(t *testing.T) {
	groups, errs := rulefmt.ParseFile(ruleFile, false, model.UTF8Validation, newParser(), discardLogger())
	if len(errs) > 0 {
		t.Fatalf("rulefmt.ParseFile(%s): %v", ruleFile, errs)
	}

	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			seen[r.Alert] = true

			if sev := r.Labels["severity"]; sev != "warning" && sev != "info" {
				t.Errorf("%s: severity %q, want warning or info", r.Alert, sev)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: annotation %s is missing", r.Alert, a)
				}
			}
			// The runbook is named after the alert, in kebab case.
			if got, want := r.Annotations["runbook_url"], runbookPrefix+"docs/runbooks/"+kebab(r.Alert)+".md"; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			url := r.Annotations["runbook_url"]
			if !strings.HasPrefix(url, runbookPrefix) {
				continue
			}
			path := filepath.Join(repoRoot, filepath.FromSlash(strings.TrimPrefix(url, runbookPrefix)))
			body, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: runbook_url %s: %v", r.Alert, url, err)
				continue
			}
			// A runbook is found by the alert name an on-call engineer sees.
			if !strings.Contains(string(body), r.Alert) {
				t.Errorf("%s: runbook %s does not name the alert", r.Alert, path)
			}
		}
	}

	var got []string
	for name := range seen {
		got = append(got, name)
	}
	sort.Strings(got)
	var want []string
	for name := range wantRunbooks {
		want = append(want, name)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("alerts in %s (-want +got):\n%s", ruleFile, diff)
	}
	for name, url := range wantRunbooks {
		if !strings.HasSuffix(url, "/"+kebab(name)+".md") {
			t.Errorf("wantRunbooks[%s] = %s does not follow the kebab-case convention", name, url)
		}
	}
}

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{
		"ScaleUpBlockedByCapacityQuota": "scale-up-blocked-by-capacity-quota",
		"CapacityQuotaInvalid":          "capacity-quota-invalid",
		"CapacityQuotaNearLimit":        "capacity-quota-near-limit",
		"ElasticQuotaAtMaxPodsPending":  "elastic-quota-at-max-pods-pending",
	} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

var wordStart = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// kebab turns an alert name into its runbook's file name.
func kebab(s string) string {
	return strings.ToLower(wordStart.ReplaceAllString(s, "${1}-${2}"))
}

// alert is one pending or firing alert as a test states it. Labels are the
// alert's full label set, alertname and severity included. Annotations are
// compared only when the test sets them.
type alert struct {
	State       string
	Labels      map[string]string
	Annotations map[string]string
}

// alertCase is a load of series and the alerts active at checkpoints.
type alertCase struct {
	name string
	// load is promqltest's load command, one sample per minute. Every
	// series carries the instance and pod labels a scrape adds, which the
	// rules must aggregate away.
	load string
	want []at
	// health says the case is about the autoscaler's own health, whose
	// alerts every other case leaves out: they load no liveness series.
	health bool
}

// healthAlerts are the alerts about the autoscaler's own health.
var healthAlerts = map[string]bool{"ClusterAutoscalerNotRunning": true, "ClusterAutoscalerLoopsFailing": true, "ClusterAutoscalerDataStale": true}

// at is what must be active right after the evaluation at At, counted from
// the start of the load.
type at struct {
	At     time.Duration
	Alerts []alert
}

// Label sets of the alerts, kept short in the table below.
func blocked(quota, nodeGroup string) map[string]string {
	return map[string]string{"alertname": "ScaleUpBlockedByCapacityQuota", "severity": "warning", "quota": quota, "node_group": nodeGroup}
}

func invalid(quota string) map[string]string {
	return map[string]string{"alertname": "CapacityQuotaInvalid", "severity": "warning", "quota": quota}
}

func nearLimit(quota, resource string) map[string]string {
	return map[string]string{"alertname": "CapacityQuotaNearLimit", "severity": "info", "quota": quota, "resource": resource}
}

func treeInvalid(tree string) map[string]string {
	return map[string]string{"alertname": "ElasticQuotaTreeInvalid", "severity": "warning", "tree": tree}
}

func atMax(node, resource string) map[string]string {
	return map[string]string{"alertname": "ElasticQuotaAtMaxPodsPending", "severity": "info", "quota_node": node, "resource": resource}
}

func reclaimFailing(node string) map[string]string {
	return map[string]string{"alertname": "ElasticQuotaReclaimFailing", "severity": "warning", "quota_node": node}
}

const (
	pending = "pending"
	firing  = "firing"
)

func TestAlerts(t *testing.T) {
	// fired records which alerts some case saw firing, so that no rule of the
	// file goes untested.
	fired := map[string]bool{}
	var cases []alertCase
	for _, tc := range []alertCase{
		{
			// Fires on the first evaluation that sees an increment, one alert
			// per quota and node group whatever resources were short, and
			// resolves once the last increment has left the 10m window.
			name: "blocked scale-up fires at once and resolves 10m after the last block",
			load: `
load 1m
  quotascale_capacity_quota_scale_up_blocked_total{quota="test-capacityquota",resource="cpu",node_group="nap-n2-highcpu-2",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x4 1+1x5 6x20
  quotascale_capacity_quota_scale_up_blocked_total{quota="test-capacityquota",resource="memory",node_group="nap-n2-highcpu-2",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x4 1+1x5 6x20
  quotascale_capacity_quota_scale_up_blocked_total{quota="test-capacityquota",resource="cpu",node_group="other-group",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x30
  cluster_autoscaler_unschedulable_pods_count{instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x4 4x10 0x16
`,
			want: []at{
				{At: 4 * time.Minute},
				{At: 5 * time.Minute, Alerts: []alert{{
					State:  firing,
					Labels: blocked("test-capacityquota", "nap-n2-highcpu-2"),
					Annotations: map[string]string{
						"summary": "CapacityQuota test-capacityquota blocked scale-up of node group nap-n2-highcpu-2.",
						"description": "In the last 10 minutes the cluster autoscaler capped or skipped scale-up of node group " +
							"nap-n2-highcpu-2 because CapacityQuota test-capacityquota had no headroom on: cpu, memory. " +
							"Pods that needed those nodes stay Pending; running workloads are not affected. " +
							"Unschedulable pods in the cluster now: 4.",
						"runbook_url": wantRunbooks["ScaleUpBlockedByCapacityQuota"],
					},
				}}},
				{At: 10 * time.Minute, Alerts: []alert{{State: firing, Labels: blocked("test-capacityquota", "nap-n2-highcpu-2")}}},
				// The last increment happened between 9m and 10m; range
				// selectors are left-open, so the 1m sample leaves at 19m.
				{At: 18 * time.Minute, Alerts: []alert{{State: firing, Labels: blocked("test-capacityquota", "nap-n2-highcpu-2")}}},
				{At: 19 * time.Minute},
				{At: 30 * time.Minute},
			},
		},
		{
			name: "blocked by the cluster-wide limits",
			load: `
load 1m
  quotascale_capacity_quota_scale_up_blocked_total{quota="cluster-wide",resource="nodes",node_group="ng-1",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0 1 2
`,
			want: []at{
				{At: 1 * time.Minute, Alerts: []alert{{
					State:  firing,
					Labels: blocked("cluster-wide", "ng-1"),
					Annotations: map[string]string{
						"summary": "The autoscaler's cluster-wide limits blocked scale-up of node group ng-1.",
						"description": "In the last 10 minutes the cluster autoscaler capped or skipped scale-up of node group " +
							"ng-1 because its cluster-wide limits had no headroom on: nodes. " +
							"Pods that needed those nodes stay Pending; running workloads are not affected. " +
							"Unschedulable pods in the cluster now: unknown.",
						"runbook_url": wantRunbooks["ScaleUpBlockedByCapacityQuota"],
					},
				}}},
			},
		},
		{
			// increase() needs two samples: a series the exporter creates on
			// its first block (value 1, no earlier 0) shows from the second
			// block on. While pods stay pending the autoscaler blocks again
			// every loop, so this costs one scrape. A counter that stays put,
			// however high, never fires.
			name: "a counter born at 1 fires from its second block; a flat counter never",
			load: `
load 1m
  quotascale_capacity_quota_scale_up_blocked_total{quota="gpu",resource="nvidia.com/gpu",node_group="ng-a",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} _ _ _ _ _ 1 2 2
  quotascale_capacity_quota_scale_up_blocked_total{quota="gpu",resource="nvidia.com/gpu",node_group="ng-b",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 7x20
`,
			want: []at{
				{At: 5 * time.Minute},
				{At: 6 * time.Minute, Alerts: []alert{{State: firing, Labels: blocked("gpu", "ng-a")}}},
				{At: 20 * time.Minute},
			},
		},
		{
			// An autoscaler restart resets its counters; increase() reads the
			// drop as a reset, not as a block.
			name: "a counter reset is not a block",
			load: `
load 1m
  quotascale_capacity_quota_scale_up_blocked_total{quota="q",resource="cpu",node_group="ng",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 3x5 0x10
`,
			want: []at{
				{At: 5 * time.Minute},
				{At: 6 * time.Minute},
				{At: 10 * time.Minute},
			},
		},
		{
			// After a leader change the new leader's series start fresh under
			// another pod label; both sum into one alert.
			name: "blocks counted by two autoscaler replicas make one alert",
			load: `
load 1m
  quotascale_capacity_quota_scale_up_blocked_total{quota="q",resource="cpu",node_group="ng",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0 1 2 2 2
  quotascale_capacity_quota_scale_up_blocked_total{quota="q",resource="cpu",node_group="ng",instance="10.0.0.8:8085",pod="quotascale-autoscaler-1"} 0 0 0 1 2
`,
			want: []at{
				{At: 1 * time.Minute, Alerts: []alert{{State: firing, Labels: blocked("q", "ng")}}},
				{At: 4 * time.Minute, Alerts: []alert{{State: firing, Labels: blocked("q", "ng")}}},
			},
		},
		{
			name: "a quota invalid for 5 minutes fires, and resolves once valid",
			load: `
load 1m
  quotascale_capacity_quota_valid{quota="bad-selector",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x9 1x10
  quotascale_capacity_quota_valid{quota="test-capacityquota",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 1x19
`,
			want: []at{
				{At: 0, Alerts: []alert{{State: pending, Labels: invalid("bad-selector")}}},
				{At: 4 * time.Minute, Alerts: []alert{{State: pending, Labels: invalid("bad-selector")}}},
				{At: 5 * time.Minute, Alerts: []alert{{
					State:  firing,
					Labels: invalid("bad-selector"),
					Annotations: map[string]string{
						"summary": "CapacityQuota bad-selector is invalid and not enforced.",
						"description": "The cluster-autoscaler.kubernetes.io/valid condition of CapacityQuota bad-selector " +
							"has been False for at least 5 minutes. The cluster autoscaler ignores an invalid quota, " +
							"so it can add nodes matching the quota's selector past the quota's limits. " +
							"`kubectl describe cq bad-selector` shows the condition's message, which says why.",
						"runbook_url": wantRunbooks["CapacityQuotaInvalid"],
					},
				}}},
				{At: 9 * time.Minute, Alerts: []alert{{State: firing, Labels: invalid("bad-selector")}}},
				{At: 10 * time.Minute},
			},
		},
		{
			// Between creating a quota and the controller validating it, or
			// while a fix is being applied, the gauge can read 0 briefly.
			name: "a quota invalid for 2 minutes only goes pending",
			load: `
load 1m
  quotascale_capacity_quota_valid{quota="q",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 1x3 0 0 1x10
`,
			want: []at{
				{At: 3 * time.Minute},
				{At: 4 * time.Minute, Alerts: []alert{{State: pending, Labels: invalid("q")}}},
				{At: 5 * time.Minute, Alerts: []alert{{State: pending, Labels: invalid("q")}}},
				{At: 6 * time.Minute},
				{At: 9 * time.Minute},
				{At: 12 * time.Minute},
			},
		},
		{
			// A standby replica that has not caught up must not raise an
			// alert about a quota the leader considers valid.
			name: "a quota valid on one replica is not invalid",
			load: `
load 1m
  quotascale_capacity_quota_valid{quota="q",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 1x10
  quotascale_capacity_quota_valid{quota="q",instance="10.0.0.8:8085",pod="quotascale-autoscaler-1"} 0x10
`,
			want: []at{{At: 0}, {At: 10 * time.Minute}},
		},
		{
			// 36 registered + 2 provisioning = 38 of 40 cpu: 95%. Memory at
			// 75% stays quiet. Two replicas export the same gauges: merged,
			// not summed, so the ratio stays 95%.
			name: "used+upcoming at 95% of the limit fires after 15 minutes",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 40x20
  quotascale_capacity_quota_used{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 36x20
  quotascale_capacity_quota_upcoming{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 2x20
  quotascale_capacity_quota_limit{quota="team-a",resource="cpu",instance="10.0.0.8:8085",pod="quotascale-autoscaler-1"} 40x20
  quotascale_capacity_quota_used{quota="team-a",resource="cpu",instance="10.0.0.8:8085",pod="quotascale-autoscaler-1"} 36x20
  quotascale_capacity_quota_upcoming{quota="team-a",resource="cpu",instance="10.0.0.8:8085",pod="quotascale-autoscaler-1"} 2x20
  quotascale_capacity_quota_limit{quota="team-a",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 137438953472x20
  quotascale_capacity_quota_used{quota="team-a",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 103079215104x20
  quotascale_capacity_quota_upcoming{quota="team-a",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
  quotascale_capacity_quota_valid{quota="team-a",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 1x20
`,
			want: []at{
				{At: 0, Alerts: []alert{{State: pending, Labels: nearLimit("team-a", "cpu")}}},
				{At: 14 * time.Minute, Alerts: []alert{{State: pending, Labels: nearLimit("team-a", "cpu")}}},
				{At: 15 * time.Minute, Alerts: []alert{{
					State:  firing,
					Labels: nearLimit("team-a", "cpu"),
					Annotations: map[string]string{
						"summary": "CapacityQuota team-a is at 95% of its cpu limit.",
						"description": "Registered and still-provisioning nodes matching CapacityQuota team-a " +
							"declare 95% of its cpu limit of 40. " +
							"The autoscaler refuses any scale-up whose new nodes would go past the limit; " +
							"nodes already running are not affected.",
						"runbook_url": wantRunbooks["CapacityQuotaNearLimit"],
					},
				}}},
			},
		},
		{
			name: "used+upcoming at 80% of the limit does not fire",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 40x20
  quotascale_capacity_quota_used{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 30x20
  quotascale_capacity_quota_upcoming{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 2x20
`,
			want: []at{{At: 0}, {At: 15 * time.Minute}, {At: 20 * time.Minute}},
		},
		{
			// 80% registered alone would not fire; the 10% still being
			// provisioned counts against the limit, as the autoscaler counts it.
			name: "upcoming nodes count toward the limit",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="team-a",resource="nodes",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 10x20
  quotascale_capacity_quota_used{quota="team-a",resource="nodes",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 8x20
  quotascale_capacity_quota_upcoming{quota="team-a",resource="nodes",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 1x20
`,
			want: []at{{At: 15 * time.Minute, Alerts: []alert{{State: firing, Labels: nearLimit("team-a", "nodes")}}}},
		},
		{
			// A sudden spike of upcoming nodes that registers or goes away
			// within minutes is an ordinary scale-up, not a trend.
			name: "a short spike of upcoming nodes only goes pending",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 40x30
  quotascale_capacity_quota_used{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 20x30
  quotascale_capacity_quota_upcoming{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x4 18x5 0x20
`,
			want: []at{
				{At: 5 * time.Minute, Alerts: []alert{{State: pending, Labels: nearLimit("team-a", "cpu")}}},
				{At: 10 * time.Minute, Alerts: []alert{{State: pending, Labels: nearLimit("team-a", "cpu")}}},
				{At: 11 * time.Minute},
				{At: 25 * time.Minute},
			},
		},
		{
			// An exporter that omits upcoming (or used) while it is 0 must not
			// drop the pair from the alert.
			name: "a missing upcoming series counts as 0",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 10x20
  quotascale_capacity_quota_used{quota="team-a",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 9.5x20
`,
			want: []at{{At: 15 * time.Minute, Alerts: []alert{{State: firing, Labels: nearLimit("team-a", "cpu")}}}},
		},
		{
			// Lowering a limit below what is running removes no node: the
			// quota reads over 100% and the alert says so, in memory units
			// people read memory in.
			name: "a limit lowered below what is running reads over 100%",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="test-capacityquota",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 17179869184x20
  quotascale_capacity_quota_used{quota="test-capacityquota",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 34359738368x20
  quotascale_capacity_quota_upcoming{quota="test-capacityquota",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
`,
			want: []at{{At: 15 * time.Minute, Alerts: []alert{{
				State:  firing,
				Labels: nearLimit("test-capacityquota", "memory"),
				Annotations: map[string]string{
					"summary": "CapacityQuota test-capacityquota is at 200% of its memory limit.",
					"description": "Registered and still-provisioning nodes matching CapacityQuota test-capacityquota " +
						"declare 200% of its memory limit of 16GiB. " +
						"The autoscaler refuses any scale-up whose new nodes would go past the limit; " +
						"nodes already running are not affected.",
					"runbook_url": wantRunbooks["CapacityQuotaNearLimit"],
				},
			}}}},
		},
		{
			name: "the cluster-wide limits near their end",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="cluster-wide",resource="nodes",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 100x20
  quotascale_capacity_quota_used{quota="cluster-wide",resource="nodes",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 92x20
  quotascale_capacity_quota_upcoming{quota="cluster-wide",resource="nodes",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 3x20
`,
			want: []at{{At: 15 * time.Minute, Alerts: []alert{{
				State:  firing,
				Labels: nearLimit("cluster-wide", "nodes"),
				Annotations: map[string]string{
					"summary": "The cluster is at 95% of the autoscaler's cluster-wide nodes limit.",
					"description": "Registered and still-provisioning nodes in the cluster " +
						"declare 95% of the autoscaler's cluster-wide nodes limit of 100. " +
						"The autoscaler refuses any scale-up whose new nodes would go past the limit; " +
						"nodes already running are not affected.",
					"runbook_url": wantRunbooks["CapacityQuotaNearLimit"],
				},
			}}}},
		},
		{
			// A limit of 0 forbids the resource outright, and an unset
			// cluster-wide limit is exported as 0. Neither may divide into
			// +Inf or NaN and raise a false alert.
			name: "a limit of 0 raises nothing",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="no-gpu",resource="nvidia.com/gpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
  quotascale_capacity_quota_used{quota="no-gpu",resource="nvidia.com/gpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 2x20
  quotascale_capacity_quota_upcoming{quota="no-gpu",resource="nvidia.com/gpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 1x20
  quotascale_capacity_quota_limit{quota="cluster-wide",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
  quotascale_capacity_quota_used{quota="cluster-wide",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
  quotascale_capacity_quota_upcoming{quota="cluster-wide",resource="memory",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
`,
			want: []at{{At: 0}, {At: 15 * time.Minute}, {At: 20 * time.Minute}},
		},
		{
			// An invalid quota is not enforced, so how full it is does not
			// matter; CapacityQuotaInvalid is the one alert about it.
			name: "an invalid quota near its limit raises only CapacityQuotaInvalid",
			load: `
load 1m
  quotascale_capacity_quota_limit{quota="bad-selector",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 8x20
  quotascale_capacity_quota_used{quota="bad-selector",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 8x20
  quotascale_capacity_quota_upcoming{quota="bad-selector",resource="cpu",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
  quotascale_capacity_quota_valid{quota="bad-selector",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
`,
			want: []at{{At: 15 * time.Minute, Alerts: []alert{{State: firing, Labels: invalid("bad-selector")}}}},
		},
	} {
		cases = append(cases, tc)
	}
	cases = append(cases, elasticQuotaCases...)
	cases = append(cases, healthCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := evaluate(t, tc.load, tc.want)
			for i, w := range tc.want {
				g := got[i]
				if !tc.health {
					// The quota cases load no liveness series of the
					// autoscaler; its health alerts have cases of their own.
					if g = slices.DeleteFunc(g, func(a alert) bool { return healthAlerts[a.Labels["alertname"]] }); len(g) == 0 {
						g = nil
					}
				}
				for _, a := range g {
					if a.State == firing {
						fired[a.Labels["alertname"]] = true
					}
				}
				// Compare annotations only where the test states them.
				for j := range g {
					if j >= len(w.Alerts) || w.Alerts[j].Annotations == nil {
						g[j].Annotations = nil
					}
				}
				if diff := cmp.Diff(w.Alerts, g); diff != "" {
					t.Errorf("alerts after the evaluation at %s (-want +got):\n%s", w.At, diff)
				}
			}
		})
	}
	for name := range wantRunbooks {
		if !fired[name] {
			t.Errorf("no case makes %s fire", name)
		}
	}
}

// evaluate loads the series lazily, as promtool's rule tests do, so that each
// evaluation sees only samples up to its own timestamp, and evaluates every
// group of the rule file every evalInterval from 0 up to the last checkpoint.
// It returns the active (pending or firing) alerts of every rule right after
// each checkpoint's evaluation, sorted by labels.
func evaluate(t *testing.T, load string, checkpoints []at) [][]alert {
	t.Helper()
	return evaluateRules(t, ruleFile, load, checkpoints)
}

// evaluateRules is evaluate over the rule file at path.
func evaluateRules(t *testing.T, path, load string, checkpoints []at) [][]alert {
	t.Helper()
	// The LazyLoader's engine uses the stock parser, as newParser does.
	suite, err := promqltest.NewLazyLoader(load, promqltest.LazyLoaderOpts{
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})
	if err != nil {
		t.Fatalf("loading series: %v", err)
	}
	t.Cleanup(func() {
		if err := suite.Close(); err != nil {
			t.Errorf("closing the test storage: %v", err)
		}
	})
	suite.SubqueryInterval = evalInterval

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		Appendable: suite.Storage(),
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     discardLogger(),
		Parser:     newParser(),
	})
	groupsByKey, errs := m.LoadGroups(evalInterval, labels.EmptyLabels(), "", nil, false, path)
	if len(errs) > 0 {
		t.Fatalf("loading %s: %v", path, errs)
	}
	// Evaluate groups in a fixed order.
	keys := make([]string, 0, len(groupsByKey))
	for k := range groupsByKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	groups := make([]*rules.Group, 0, len(keys))
	for _, k := range keys {
		g := groupsByKey[k]
		groups = append(groups, g)
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				// As promtool does: a freshly loaded rule would otherwise wait
				// to restore its `for` state from storage.
				ar.SetRestored(true)
			}
		}
	}

	start := time.Unix(0, 0).UTC()
	var last time.Duration
	for _, c := range checkpoints {
		if c.At%evalInterval != 0 {
			t.Fatalf("checkpoint %s is not on an evaluation (every %s)", c.At, evalInterval)
		}
		last = max(last, c.At)
	}

	results := make([][]alert, len(checkpoints))
	for off := time.Duration(0); off <= last; off += evalInterval {
		ts := start.Add(off)
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatalf("appending samples up to %s: %v", off, err)
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if err := r.LastError(); err != nil {
						t.Fatalf("rule %s at %s: %v", r.Name(), off, err)
					}
				}
			}
		})
		active := activeAlerts(t, groups, off)
		for i, c := range checkpoints {
			if c.At == off {
				results[i] = active
			}
		}
	}
	return results
}

// activeAlerts lists the pending and firing alerts of every alerting rule.
// A template that failed to expand is a test failure wherever it happens.
func activeAlerts(t *testing.T, groups []*rules.Group, off time.Duration) []alert {
	t.Helper()
	var out []alert
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				annotations := a.Annotations.Map()
				for k, v := range annotations {
					if strings.Contains(v, "<error expanding template") || strings.Contains(v, "<no value>") {
						t.Errorf("%s at %s: annotation %s: %s", ar.Name(), off, k, v)
					}
				}
				out = append(out, alert{
					State:       a.State.String(),
					Labels:      a.Labels.Map(),
					Annotations: annotations,
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Labels) < fmt.Sprint(out[j].Labels) })
	return out
}
