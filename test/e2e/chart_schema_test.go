package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChartValuesSchema feeds bad values: values.schema.json or the templates
// must refuse each with a message naming the problem.
func TestChartValuesSchema(t *testing.T) {
	ch := loadChart(t)
	caps := chartClusterCapabilities(t)
	cases := []struct {
		name    string
		values  string
		wantErr []string
	}{
		{
			name:    "misspelt key",
			values:  "autoscaler:\n  replica: 2\n",
			wantErr: []string{"at '/autoscaler'", "'replica' not allowed"},
		},
		{
			name:    "misspelt top-level key",
			values:  "monitoring:\n  serviceMonitor:\n    enable: true\n",
			wantErr: []string{"at '/monitoring/serviceMonitor'", "'enable' not allowed"},
		},
		{
			// The Prometheus Operator deprecated bearerTokenFile; a values
			// file that still sets it must say so rather than be ignored.
			name:    "scheduler bearerTokenFile",
			values:  "monitoring:\n  serviceMonitor:\n    scheduler:\n      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
			wantErr: []string{"at '/monitoring/serviceMonitor/scheduler'", "'bearerTokenFile' not allowed"},
		},
		{
			name:    "scheduler credentials without a key",
			values:  "monitoring:\n  serviceMonitor:\n    scheduler:\n      credentials: {name: prometheus-token, key: \"\"}\n",
			wantErr: []string{"at '/monitoring/serviceMonitor/scheduler/credentials/key'", "minLength"},
		},
		{
			name:    "unknown cloud provider",
			values:  "autoscaler:\n  cloudProvider: aws\n",
			wantErr: []string{"at '/autoscaler/cloudProvider'", "kwok", "clusterapi"},
		},
		{
			name:    "replicas as a string",
			values:  "autoscaler:\n  replicas: \"2\"\n",
			wantErr: []string{"at '/autoscaler/replicas'", "want integer"},
		},
		{
			name:    "kwok quantity as a number",
			values:  "autoscaler:\n  kwok:\n    nodeGroups:\n      - name: a\n        maxSize: 1\n        capacity: {cpu: 4, memory: 16Gi}\n",
			wantErr: []string{"at '/autoscaler/kwok/nodeGroups/0/capacity/cpu'", "want string"},
		},
		{
			name:    "kwok group without memory",
			values:  "autoscaler:\n  kwok:\n    nodeGroups:\n      - name: a\n        maxSize: 1\n        capacity: {cpu: \"4\"}\n",
			wantErr: []string{"at '/autoscaler/kwok/nodeGroups/0/capacity'", "memory"},
		},
		{
			name:    "kwok without node groups",
			values:  "autoscaler:\n  kwok:\n    nodeGroups: []\n",
			wantErr: []string{"at '/autoscaler/kwok/nodeGroups'", "minItems"},
		},
		{
			name:    "flag the chart sets",
			values:  "autoscaler:\n  extraArgs:\n    cloud-provider: aws\n",
			wantErr: []string{"at '/autoscaler/extraArgs/cloud-provider'", "false schema"},
		},
		{
			name:    "flag with dashes",
			values:  "scheduler:\n  extraArgs:\n    --v: 2\n",
			wantErr: []string{"at '/scheduler/extraArgs'", "'--v' not allowed"},
		},
		{
			name:    "status interval that is not a duration",
			values:  "scheduler:\n  capacityScheduling:\n    statusUpdateInterval: 2\n",
			wantErr: []string{"at '/scheduler/capacityScheduling/statusUpdateInterval'", "want string"},
		},
		{
			name:    "two autoscalers without leader election",
			values:  "autoscaler:\n  replicas: 2\n  leaderElection:\n    enabled: false\n",
			wantErr: []string{"autoscaler.replicas > 1 needs autoscaler.leaderElection.enabled"},
		},
		{
			name:    "two schedulers without leader election",
			values:  "scheduler:\n  replicas: 2\n  leaderElection:\n    enabled: false\n",
			wantErr: []string{"scheduler.replicas > 1 needs scheduler.leaderElection.enabled"},
		},
		{
			name:    "duplicate kwok node group",
			values:  "autoscaler:\n  kwok:\n    nodeGroups:\n      - {name: a, maxSize: 1, capacity: {cpu: \"1\", memory: 1Gi}}\n      - {name: a, maxSize: 2, capacity: {cpu: \"1\", memory: 1Gi}}\n",
			wantErr: []string{`the name "a" is used by more than one node group`},
		},
		{
			name:    "service account not created and not named",
			values:  "scheduler:\n  serviceAccount:\n    create: false\n",
			wantErr: []string{"scheduler.serviceAccount.name is required"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(ch, tc.values, "quotascale-system", caps)
			if err == nil {
				t.Fatalf("values accepted:\n%s", tc.values)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
	// And the good values of the documentation render.
	for _, values := range []string{
		"",
		"autoscaler:\n  extraArgs:\n    expander: priority,least-waste\n    max-nodes-total: 100\n    v: 2\n",
		"autoscaler:\n  enabled: false\nscheduler:\n  enabled: false\n",
		"scheduler:\n  serviceAccount:\n    create: false\n    name: existing\n  extraArgs:\n    v: [2]\n",
	} {
		if _, err := renderChart(ch, values, "quotascale-system", caps); err != nil {
			t.Errorf("values refused:\n%s\n%v", values, err)
		}
	}
}

// TestChartCRDsMatchGenerated keeps the chart's crds/ byte-identical to what
// `make generate` writes into apis/crds; `make generate` also copies them into the chart.
func TestChartCRDsMatchGenerated(t *testing.T) {
	generated, err := filepath.Glob("../../apis/crds/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inChart, err := filepath.Glob(filepath.Join(chartDir, "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	base := func(paths []string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = filepath.Base(p)
		}
		sort.Strings(out)
		return out
	}
	if len(generated) == 0 {
		t.Fatal("no CRDs in apis/crds")
	}
	if diff := cmp.Diff(base(generated), base(inChart)); diff != "" {
		t.Fatalf("charts/quotascale/crds differs from apis/crds (-generated +chart); run `make generate`:\n%s", diff)
	}
	for _, g := range generated {
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(g)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("charts/quotascale/crds/%s differs from apis/crds; run `make generate`", filepath.Base(g))
		}
	}
}
