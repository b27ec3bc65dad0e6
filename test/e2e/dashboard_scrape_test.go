package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/localcluster/scrape"
)

// dashboardScrape is the scrape the dashboard's test checks its expressions
// against (deploy/dashboard).
var dashboardScrape = filepath.Join(repoRoot, "deploy", "dashboard", "testdata", "scrape.prom")

// TestDashboardScrape scrapes the autoscaler and the scheduler during seed
// 001's CapacityQuota scenario and the ElasticQuotaTree seed's first three
// steps (a reclaim among them), and checks that every series and label of the
// recorded scrape the dashboard test reads is exported now: the dashboard is
// checked against what the binaries really serve. QUOTASCALE_RECORD_SCRAPE=1
// rewrites the recorded scrape from this run.
func TestDashboardScrape(t *testing.T) {
	ctx := testContext(t)
	ns := createNamespace(t, ctx, "")
	applyCapacityQuotas(t, ctx, readTestdata(t, "capacity-quota/quota.yaml"))
	a := startAutoscaler(t, ctx, seedCapacityQuotaGroup, nil)
	applyInNamespace(t, ctx, ns, readTestdata(t, "capacity-quota/workload.yaml"))
	waitUnschedulable(t, ctx, ns, 16)
	a.loopUntil(t, ctx, "a scale-up blocked by the quota", func(context.Context) error {
		if got := counterValue(t, a.Autoscaler, "quotascale_capacity_quota_scale_up_blocked_total", map[string]string{"quota": "test-capacityquota"}); got < 1 {
			return fmt.Errorf("blocked scale-ups = %v", got)
		}
		return nil
	})

	namespaces := []string{"namespace1", "namespace2", "namespace3", "namespace4"}
	for _, n := range namespaces {
		createNamespace(t, ctx, n)
	}
	big := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("56"), corev1.ResourceMemory: resource.MustParse("224Gi")}
	createNodes(t, ctx, localcluster.NodeSpec{Name: "scrape-1", Capacity: big}, localcluster.NodeSpec{Name: "scrape-2", Capacity: big})
	applyTree(t, ctx, readTestdata(t, "elastic-quota-tree/tree.yaml"))
	for _, step := range []struct {
		manifest string
		want     []int
	}{{"nginx1.yaml", []int{4, 0, 0, 0}}, {"nginx2.yaml", []int{4, 4, 0, 0}}, {"nginx3.yaml", []int{3, 3, 2, 0}}} {
		apply(t, ctx, readTestdata(t, "elastic-quota-tree/"+step.manifest))
		settle(t, ctx, "after "+step.manifest, func(ctx context.Context) error {
			got, err := runningPerNamespace(ctx, namespaces)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(step.want, got); diff != "" {
				return fmt.Errorf("running pods per namespace (-want +got):\n%s", diff)
			}
			return nil
		})
	}
	a.loop(t, ctx)

	live, err := scrape.Quotascale(a.Autoscaler.Metrics.Registry)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("QUOTASCALE_RECORD_SCRAPE") == "1" {
		writeScrape(t, dashboardScrape, live)
	}
	recorded := readScrape(t, dashboardScrape)
	if missing := missingSeries(seriesLabels(recorded), seriesLabels(live)); len(missing) > 0 {
		t.Errorf("the recorded scrape has series and labels the binaries no longer export (re-record with QUOTASCALE_RECORD_SCRAPE=1 and fix the dashboard):\n%s",
			strings.Join(missing, "\n"))
	}
}

func writeScrape(t *testing.T, path string, families []*dto.MetricFamily) {
	t.Helper()
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readScrape(t *testing.T, path string) []*dto.MetricFamily {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []*dto.MetricFamily
	for _, f := range byName {
		out = append(out, f)
	}
	return out
}

// seriesLabels lists every family with each label name its samples carry.
func seriesLabels(families []*dto.MetricFamily) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, f := range families {
		out[f.GetName()] = map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				out[f.GetName()][l.GetName()] = true
			}
		}
	}
	return out
}

func missingSeries(recorded, live map[string]map[string]bool) []string {
	var missing []string
	for name, labels := range recorded {
		have, ok := live[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		for l := range labels {
			if !have[l] {
				missing = append(missing, name+" label "+l)
			}
		}
	}
	sort.Strings(missing)
	return missing
}
