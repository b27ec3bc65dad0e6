package e2e

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChartServiceMonitorAuthorization: the scheduler's ServiceMonitor sends a
// bearer token from a Secret through the authorization field, never through
// the Prometheus Operator's deprecated bearerTokenFile, and the chart creates
// the token's Secret only when the values name none.
func TestChartServiceMonitorAuthorization(t *testing.T) {
	ch := loadChart(t)
	caps := chartClusterCapabilities(t)
	const ns = "quotascale-system"
	cases := []struct {
		name   string
		values string
		// want is the scheduler endpoint's authorization.
		want map[string]any
		// tokenObjects: the chart renders the metrics reader's ServiceAccount,
		// token Secret and RBAC.
		tokenObjects bool
	}{
		{
			name:   "the chart's token Secret",
			values: "autoscaler:\n  cloudProvider: clusterapi\nmonitoring:\n  serviceMonitor:\n    enabled: true\n",
			want: map[string]any{"type": "Bearer",
				"credentials": map[string]any{"name": "quotascale-scheduler-metrics-reader-token", "key": "token"}},
			tokenObjects: true,
		},
		{
			name:   "a Secret of the values",
			values: "autoscaler:\n  cloudProvider: clusterapi\nmonitoring:\n  serviceMonitor:\n    enabled: true\n    scheduler:\n      credentials: {name: prometheus-scrape, key: bearer}\n",
			want: map[string]any{"type": "Bearer",
				"credentials": map[string]any{"name": "prometheus-scrape", "key": "bearer"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderChart(ch, tc.values, ns, caps)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			sm := r.find("ServiceMonitor", "quotascale-scheduler")
			if sm == nil {
				t.Fatal("no ServiceMonitor for the scheduler")
			}
			var spec struct {
				Endpoints []map[string]any `json:"endpoints"`
			}
			chartRemarshal(t, sm.Object["spec"], &spec)
			if len(spec.Endpoints) != 1 {
				t.Fatalf("%d endpoints, want 1", len(spec.Endpoints))
			}
			e := spec.Endpoints[0]
			for _, deprecated := range []string{"bearerTokenFile", "bearerTokenSecret"} {
				if v, ok := e[deprecated]; ok {
					t.Errorf("the endpoint sets the deprecated %s: %v", deprecated, v)
				}
			}
			if diff := cmp.Diff(tc.want, e["authorization"]); diff != "" {
				t.Errorf("authorization (-want +got):\n%s", diff)
			}
			got := false
			for _, key := range chartMetricsReaderObjects(ns) {
				for _, k := range r.keys() {
					got = got || k == key
				}
			}
			if got != tc.tokenObjects {
				t.Errorf("metrics reader objects rendered: %v, want %v (objects: %v)", got, tc.tokenObjects, r.keys())
			}
			if !tc.tokenObjects {
				return
			}
			secret := r.find("Secret", "quotascale-scheduler-metrics-reader-token")
			if secret == nil {
				t.Fatal("no token Secret")
			}
			gotSecret := map[string]any{"type": secret.Object["type"], "annotations": secret.GetAnnotations()}
			wantSecret := map[string]any{"type": "kubernetes.io/service-account-token",
				"annotations": map[string]string{"kubernetes.io/service-account.name": "quotascale-scheduler-metrics-reader"}}
			if diff := cmp.Diff(wantSecret, gotSecret); diff != "" {
				t.Errorf("token Secret (-want +got):\n%s", diff)
			}
		})
	}
}
