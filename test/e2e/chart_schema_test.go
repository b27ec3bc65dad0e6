package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestChartValuesSchema feeds bad values: values.schema.json or the templates
// must refuse each with a message naming the problem. Each case is layered over
// a valid provider, so that it fails for its own reason and not for the
// missing one (TestChartCloudProviderRequired covers that).
func TestChartValuesSchema(t *testing.T) {
	ch := loadChart(t)
	caps := chartClusterCapabilities(t)
	const provider = "autoscaler:\n  cloudProvider: clusterapi\n"
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
			values:  "autoscaler:\n  cloudProvider: kwok\n  kwok:\n    nodeGroups:\n      - name: a\n        maxSize: 1\n        capacity: {cpu: 4, memory: 16Gi}\n",
			wantErr: []string{"at '/autoscaler/kwok/nodeGroups/0/capacity/cpu'", "want string"},
		},
		{
			name:    "kwok group without memory",
			values:  "autoscaler:\n  cloudProvider: kwok\n  kwok:\n    nodeGroups:\n      - name: a\n        maxSize: 1\n        capacity: {cpu: \"4\"}\n",
			wantErr: []string{"at '/autoscaler/kwok/nodeGroups/0/capacity'", "memory"},
		},
		{
			name:    "kwok without node groups",
			values:  "autoscaler:\n  cloudProvider: kwok\n  kwok:\n    nodeGroups: []\n",
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
			values:  "autoscaler:\n  cloudProvider: kwok\n  kwok:\n    nodeGroups:\n      - {name: a, maxSize: 1, capacity: {cpu: \"1\", memory: 1Gi}}\n      - {name: a, maxSize: 2, capacity: {cpu: \"1\", memory: 1Gi}}\n",
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
			_, err := renderChart(ch, chartMergeValues(t, provider, tc.values), "quotascale-system", caps)
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
		"autoscaler:\n  cloudProvider: clusterapi\n  extraArgs:\n    expander: priority,least-waste\n    max-nodes-total: 100\n    v: 2\n",
		"autoscaler:\n  enabled: false\nscheduler:\n  enabled: false\n",
		"autoscaler:\n  cloudProvider: kwok\n  kwok:\n    nodeGroups:\n      - {name: a, maxSize: 1, capacity: {cpu: \"1\", memory: 1Gi}}\n" +
			"scheduler:\n  serviceAccount:\n    create: false\n    name: existing\n  extraArgs:\n    v: [2]\n",
	} {
		if _, err := renderChart(ch, values, "quotascale-system", caps); err != nil {
			t.Errorf("values refused:\n%s\n%v", values, err)
		}
	}
}

// TestChartCloudProviderRequired: the chart has no default cloud provider, so
// that `helm install` with no values cannot put the kwok simulator on a real
// cluster. Without one it refuses to render and says which key to set and to
// what; kwok comes only from values-demo.yaml.
func TestChartCloudProviderRequired(t *testing.T) {
	ch := loadChart(t)
	caps := chartClusterCapabilities(t)
	for _, tc := range []struct{ name, values string }{
		{"default values", ""},
		{"empty", "autoscaler:\n  cloudProvider: \"\"\n"},
		// --set autoscaler.cloudProvider=null deletes the key.
		{"null", "autoscaler:\n  cloudProvider: null\n"},
		{"scheduler settings only", "scheduler:\n  schedulerName: batch\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(ch, tc.values, "quotascale-system", caps)
			if err == nil {
				t.Fatalf("rendered without a cloud provider:\n%s", tc.values)
			}
			for _, want := range []string{"autoscaler.cloudProvider is required", "clusterapi", "kwok", "values-demo.yaml"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}

	// Without the autoscaler there is nothing to choose.
	if _, err := renderChart(ch, "autoscaler:\n  enabled: false\n", "quotascale-system", caps); err != nil {
		t.Errorf("scheduler alone refused: %v", err)
	}

	// The demo values file selects kwok, and kwok is then all it renders.
	r, err := renderChart(ch, chartDemoValues(t), "quotascale-system", caps)
	if err != nil {
		t.Fatalf("values-demo.yaml refused: %v", err)
	}
	d := r.find("Deployment", "quotascale-cluster-autoscaler")
	if d == nil {
		t.Fatal("values-demo.yaml rendered no autoscaler Deployment")
	}
	flags := chartFromUnstructured[appsv1.Deployment](t, d).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(flags, "--cloud-provider=kwok") {
		t.Errorf("values-demo.yaml: autoscaler args %q lack --cloud-provider=kwok", flags)
	}
	if r.find("ConfigMap", "quotascale-cluster-autoscaler-kwok-config") == nil {
		t.Error("values-demo.yaml rendered no kwok node-group ConfigMap")
	}
	if !strings.Contains(r.notes, "kwok provider") {
		t.Errorf("NOTES.txt does not name the kwok provider:\n%s", r.notes)
	}
}

// TestChartAutoscalerLeaseName: a Lease renamed with extraArgs (for example to
// share another autoscaler's) is the one the Role lets the autoscaler hold;
// otherwise leader election is refused and no replica ever leads.
func TestChartAutoscalerLeaseName(t *testing.T) {
	ch := loadChart(t)
	caps := chartClusterCapabilities(t)
	for values, want := range map[string]string{
		"autoscaler:\n  cloudProvider: clusterapi\n":                                                             "cluster-autoscaler",
		"autoscaler:\n  cloudProvider: clusterapi\n  extraArgs:\n    leader-elect-resource-name: shared-lease\n": "shared-lease",
	} {
		r, err := renderChart(ch, values, "quotascale-system", caps)
		if err != nil {
			t.Fatalf("rendering:\n%s\n%v", values, err)
		}
		o := r.find("Role", "quotascale-cluster-autoscaler")
		if o == nil {
			t.Fatal("no autoscaler Role")
		}
		var names []string
		for _, rule := range chartFromUnstructured[rbacv1.Role](t, o).Rules {
			if slices.Contains(rule.Resources, "leases") && slices.Contains(rule.Verbs, "update") {
				names = append(names, rule.ResourceNames...)
			}
		}
		if diff := cmp.Diff([]string{want}, names); diff != "" {
			t.Errorf("Lease names the Role lets the autoscaler update (-want +got), values:\n%s\n%s", values, diff)
		}
	}
}

// TestChartKubeVersion: Chart.yaml's kubeVersion follows Kubernetes' version
// skew policy for the kube-scheduler the chart ships (1.37): not newer than the
// API server, at most one minor version older. Helm refuses an install outside
// the range before it renders anything, with scheduler.enabled or not.
func TestChartKubeVersion(t *testing.T) {
	ch := loadChart(t)
	for v, want := range map[string]bool{
		"v1.36.9":          false,
		"v1.37.0":          true,
		"v1.37.2-gke.1200": true,
		"v1.38.4":          true,
		"v1.39.0":          false,
	} {
		if got := chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, v); got != want {
			t.Errorf("kubeVersion %q on a %s control plane: compatible=%v, want %v", ch.Metadata.KubeVersion, v, got, want)
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
