package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// checkChartDashboard: the dashboard ConfigMap carries files/dashboard.json
// unchanged, under the label kube-prometheus-stack's Grafana sidecar looks for.
func checkChartDashboard(t *testing.T, r *chartRendering) {
	t.Helper()
	cm := r.find("ConfigMap", chartRelease+"-dashboard")
	if cm == nil {
		return
	}
	want, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "quotascale.json")
	if diff := cmp.Diff(strings.TrimSpace(string(want)), got); diff != "" {
		t.Errorf("dashboard ConfigMap differs from files/dashboard.json (-want +got):\n%s", diff)
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.GetLabels())
	}
}
