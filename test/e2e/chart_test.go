package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/localcluster"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// The chart tests render charts/quotascale with Helm's own Go library (loader,
// schema validation, template engine: what `helm install` runs before it talks to
// the cluster), then check what came out: the API server accepts every object
// (server-side apply, dry run), the pods pass the "restricted" Pod Security
// Standard, RBAC has no wildcard and grants each program what its code calls and
// nothing the other program owns, and the flags and config files parse with the
// programs' own parsers.

const (
	chartDir         = "../../charts/quotascale"
	chartRelease     = "quotascale"
	chartFieldOwner  = "quotascale-chart-e2e"
	schedulerCfgPath = "/etc/quotascale/scheduler-config.yaml"
)

// chartRendering is one rendering of the chart.
type chartRendering struct {
	// objects are the templates' objects, in file then document order; crds are
	// the chart's crds/ directory, which Helm applies untemplated.
	objects []*unstructured.Unstructured
	crds    []*unstructured.Unstructured
	notes   string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// chartDemoValues is charts/quotascale/values-demo.yaml, the only values that
// select the kwok provider outside the tests' own.
func chartDemoValues(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values-demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chartMergeValues merges values documents as `helm install -f a -f b` does: a
// later document wins, maps merge key by key, anything else is replaced whole.
func chartMergeValues(t *testing.T, docs ...string) string {
	t.Helper()
	merged := map[string]any{}
	for _, doc := range docs {
		v, err := chartutil.ReadValues([]byte(doc))
		if err != nil {
			t.Fatalf("reading values: %v\n%s", err, doc)
		}
		merged = chartMergeMaps(merged, v)
	}
	out, err := chartutil.Values(merged).YAML()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func chartMergeMaps(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = chartMergeMaps(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// renderChart does what `helm install --dry-run` does up to the manifests:
// coalesce values, validate them against values.schema.json, render in strict
// mode (a template reading a missing value is an error).
func renderChart(ch *chart.Chart, valuesYAML, namespace string, caps *chartutil.Capabilities) (*chartRendering, error) {
	vals, err := chartutil.ReadValues([]byte(valuesYAML))
	if err != nil {
		return nil, fmt.Errorf("reading values: %w", err)
	}
	if caps == nil {
		caps = chartutil.DefaultCapabilities
	}
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, cluster is %s", ch.Metadata.KubeVersion, caps.KubeVersion)
	}
	opts := chartutil.ReleaseOptions{Name: chartRelease, Namespace: namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, renderValues)
	if err != nil {
		return nil, err
	}
	out := &chartRendering{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			out.notes = files[name]
			continue
		case !strings.HasSuffix(name, ".yaml"):
			continue
		}
		objs, err := localcluster.DecodeManifests([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out.objects = append(out.objects, objs...)
	}
	for _, crd := range ch.CRDObjects() {
		objs, err := localcluster.DecodeManifests(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		out.crds = append(out.crds, objs...)
	}
	return out, nil
}

func chartObjectKey(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

func (r *chartRendering) keys() []string {
	out := make([]string, 0, len(r.objects))
	for _, o := range r.objects {
		out = append(out, chartObjectKey(o))
	}
	sort.Strings(out)
	return out
}

func (r *chartRendering) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func chartFromUnstructured[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", chartObjectKey(u), err)
	}
	return out
}

// chartAutoscalerObjects and chartSchedulerObjects list what a rendering holds, by component, for the want lists.
func chartAutoscalerObjects(ns string, kwokProvider, pdb bool) []string {
	out := []string{
		"ClusterRole quotascale-cluster-autoscaler",
		"ClusterRoleBinding quotascale-cluster-autoscaler",
		"Deployment " + ns + "/quotascale-cluster-autoscaler",
		"Role " + ns + "/quotascale-cluster-autoscaler",
		"RoleBinding " + ns + "/quotascale-cluster-autoscaler",
		"Service " + ns + "/quotascale-cluster-autoscaler-metrics",
		"ServiceAccount " + ns + "/quotascale-cluster-autoscaler",
	}
	if kwokProvider {
		out = append(out, "ConfigMap "+ns+"/quotascale-cluster-autoscaler-kwok-config")
	}
	if pdb {
		out = append(out, "PodDisruptionBudget "+ns+"/quotascale-cluster-autoscaler")
	}
	return out
}

func chartSchedulerObjects(ns string) []string {
	return append(chartSchedulerCoreObjects(ns),
		"Secret "+ns+"/quotascale-scheduler-webhook-tls",
		"Service "+ns+"/quotascale-scheduler-webhook",
		"ValidatingWebhookConfiguration quotascale-scheduler",
	)
}

// chartSchedulerCoreObjects are the scheduler's objects without its webhook.
func chartSchedulerCoreObjects(ns string) []string {
	return []string{
		"ClusterRole quotascale-scheduler",
		"ClusterRoleBinding quotascale-scheduler",
		"ClusterRoleBinding quotascale-scheduler-kube-scheduler",
		"ClusterRoleBinding quotascale-scheduler-volume-scheduler",
		"ConfigMap " + ns + "/quotascale-scheduler-config",
		"Deployment " + ns + "/quotascale-scheduler",
		"PodDisruptionBudget " + ns + "/quotascale-scheduler",
		"Role " + ns + "/quotascale-scheduler-leader-election",
		"RoleBinding " + ns + "/quotascale-scheduler-leader-election",
		"RoleBinding kube-system/quotascale-scheduler-authentication-reader",
		"Service " + ns + "/quotascale-scheduler-metrics",
		"ServiceAccount " + ns + "/quotascale-scheduler",
	}
}

// chartMetricsReaderObjects: the ServiceAccount, token Secret and RBAC that the
// scheduler's ServiceMonitor authenticates with when its values name no Secret.
func chartMetricsReaderObjects(ns string) []string {
	return []string{
		"ClusterRole quotascale-scheduler-metrics-reader",
		"ClusterRoleBinding quotascale-scheduler-metrics-reader",
		"Secret " + ns + "/quotascale-scheduler-metrics-reader-token",
		"ServiceAccount " + ns + "/quotascale-scheduler-metrics-reader",
	}
}

func chartObjectList(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

// chartWant is what one value set must render.
type chartWant struct {
	objects []string
	// autoscaler holds the parsed flags that the chart sets; nil when the
	// autoscaler is off.
	autoscaler *chartAutoscalerFlags
	// kwokGroups are the kwok config's node group names.
	kwokGroups []string
	// scheduler is the KubeSchedulerConfiguration's gist.
	scheduler *chartSchedulerGist
	replicas  map[string]int32 // Deployment name -> replicas
	// spread lists the Deployments that must get the default anti-affinity.
	spread []string
	// allowed and denied are requests of the autoscaler's and the scheduler's
	// ServiceAccounts that RBAC must allow, or must not.
	autoscalerAllowed, autoscalerDenied []rbacAccess
	schedulerAllowed, schedulerDenied   []rbacAccess
	// metricsReaderAllowed and metricsReaderDenied: the same for the
	// ServiceAccount whose token Prometheus scrapes the scheduler with.
	metricsReaderAllowed, metricsReaderDenied []rbacAccess
}

type chartAutoscalerFlags struct {
	CloudProvider, CloudConfig, Namespace, KwokState, Address string
	LeaderElect                                               bool
	ScanInterval                                              time.Duration
	// The clusterapi provider's connections and discovery.
	Kubeconfig             string
	Authoritative          bool
	NodeGroupAutoDiscovery []string
}

type chartSchedulerGist struct {
	ProfileNames         []string
	LeaderElect          bool
	LeaseName, LeaseNS   string
	MultiPoint           []string
	PostFilterDisabled   []string
	Args                 capacityscheduling.Args
	SchedulerDeployment  string
	ConfigMapName        string
	ConfigMapKey         string
	SchedulerSecurePorts []int32
}

func TestChartRender(t *testing.T) {
	ctx := testContext(t)
	ch := loadChart(t)
	caps := chartClusterCapabilities(t)
	chartInstallMonitoringCRDs(t, ctx)

	alerts, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		values string
		// demo layers values over values-demo.yaml, as `-f values-demo.yaml -f
		// values` would.
		demo bool
		// want is filled per case once the namespace is known.
		want func(ns string) chartWant
	}{
		{
			name: "demo-values",
			demo: true,
			want: func(ns string) chartWant {
				w := chartWant{
					objects:    chartObjectList(chartAutoscalerObjects(ns, true, true), chartSchedulerObjects(ns)),
					autoscaler: &chartAutoscalerFlags{CloudProvider: "kwok", CloudConfig: "configmap:" + ns + "/quotascale-cluster-autoscaler-kwok-config", Namespace: ns, KwokState: ns + "/quotascale-kwok-cloud", Address: ":8085", LeaderElect: true, ScanInterval: 10 * time.Second},
					kwokGroups: []string{"default-pool"},
					scheduler:  chartDefaultSchedulerGist(ns, "quotascale-scheduler"),
					replicas:   map[string]int32{"quotascale-cluster-autoscaler": 1, "quotascale-scheduler": 1},
				}
				w.autoscalerAllowed, w.autoscalerDenied = chartAutoscalerAccess(ns)
				w.autoscalerDenied = append(w.autoscalerDenied, chartClusterAPIAccess...)
				w.schedulerAllowed, w.schedulerDenied = chartSchedulerAccess(ns, ns)
				return w
			},
		},
		{
			name: "clusterapi-provider",
			values: `
autoscaler:
  cloudProvider: clusterapi
  clusterAPI:
    infrastructureMachineTemplates: [kwokmachinetemplates]
  extraArgs:
    scan-interval: 30s
    v: 2
`,
			want: func(ns string) chartWant {
				w := chartWant{
					objects:    chartObjectList(chartAutoscalerObjects(ns, false, true), chartSchedulerObjects(ns)),
					autoscaler: &chartAutoscalerFlags{CloudProvider: "clusterapi", Namespace: ns, KwokState: "kube-system/quotascale-kwok-cloud", Address: ":8085", LeaderElect: true, ScanInterval: 30 * time.Second},
					scheduler:  chartDefaultSchedulerGist(ns, "quotascale-scheduler"),
					replicas:   map[string]int32{"quotascale-cluster-autoscaler": 1, "quotascale-scheduler": 1},
				}
				w.autoscalerAllowed, w.autoscalerDenied = chartAutoscalerAccess(ns)
				w.autoscalerAllowed = append(w.autoscalerAllowed, chartClusterAPIAccess...)
				w.autoscalerAllowed = append(w.autoscalerAllowed,
					rbacAccess{verb: "watch", group: "infrastructure.cluster.x-k8s.io", resource: "kwokmachinetemplates"})
				w.autoscalerDenied = append(w.autoscalerDenied,
					rbacAccess{verb: "update", group: "infrastructure.cluster.x-k8s.io", resource: "kwokmachinetemplates", namespace: "capi", name: "t"},
					rbacAccess{verb: "delete", group: "cluster.x-k8s.io", resource: "machines", namespace: "capi", name: "m"},
					rbacAccess{verb: "create", group: "cluster.x-k8s.io", resource: "machinedeployments", namespace: "capi"})
				w.schedulerAllowed, w.schedulerDenied = chartSchedulerAccess(ns, ns)
				return w
			},
		},
		{
			name: "clusterapi-management-apart",
			values: `
autoscaler:
  cloudProvider: clusterapi
  clusterAPI:
    mode: kubeconfig-kubeconfig
    managementKubeconfigSecret: management-kubeconfig
    workloadKubeconfigSecret: workload-kubeconfig
    autoDiscovery:
      namespace: staging
      clusterName: purple
      labels:
        - owner: jim
      specs: ["clusterapi:namespace=blue"]
    infrastructureMachineTemplates: [kwokmachinetemplates]
`,
			want: func(ns string) chartWant {
				w := chartWant{
					objects: chartObjectList(chartAutoscalerObjects(ns, false, true), chartSchedulerObjects(ns)),
					autoscaler: &chartAutoscalerFlags{CloudProvider: "clusterapi", CloudConfig: "/etc/kubernetes/management/value",
						Kubeconfig: "/etc/kubernetes/workload/value", Namespace: ns, KwokState: "kube-system/quotascale-kwok-cloud",
						Address: ":8085", LeaderElect: true, ScanInterval: 10 * time.Second,
						NodeGroupAutoDiscovery: []string{"clusterapi:namespace=staging,clusterName=purple,owner=jim", "clusterapi:namespace=blue"}},
					scheduler: chartDefaultSchedulerGist(ns, "quotascale-scheduler"),
					replicas:  map[string]int32{"quotascale-cluster-autoscaler": 1, "quotascale-scheduler": 1},
				}
				w.autoscalerAllowed, w.autoscalerDenied = chartAutoscalerAccess(ns)
				// The Cluster API objects are on the management cluster.
				w.autoscalerDenied = append(w.autoscalerDenied, chartClusterAPIAccess...)
				w.schedulerAllowed, w.schedulerDenied = chartSchedulerAccess(ns, ns)
				return w
			},
		},
		{
			name: "replace-default-profile",
			demo: true,
			values: `
scheduler:
  replaceDefaultProfile: true
  defaultPreemption: true
  leaderElection:
    resourceNamespace: kube-system
  capacityScheduling:
    statusUpdateInterval: 5s
    minCandidateNodesAbsolute: 50
  webhook:
    enabled: false
`,
			want: func(ns string) chartWant {
				g := chartDefaultSchedulerGist(ns, "default-scheduler")
				g.LeaseNS = "kube-system"
				g.PostFilterDisabled = nil
				g.Args.StatusUpdateInterval = &metav1.Duration{Duration: 5 * time.Second}
				g.Args.MinCandidateNodesAbsolute = ptr.To[int32](50)
				g.Args.Webhook = nil
				objects := chartSchedulerCoreObjects(ns)
				for i, o := range objects {
					objects[i] = strings.Replace(o, ns+"/quotascale-scheduler-leader-election", "kube-system/quotascale-scheduler-leader-election", 1)
				}
				w := chartWant{
					objects:    chartObjectList(chartAutoscalerObjects(ns, true, true), objects),
					autoscaler: &chartAutoscalerFlags{CloudProvider: "kwok", CloudConfig: "configmap:" + ns + "/quotascale-cluster-autoscaler-kwok-config", Namespace: ns, KwokState: ns + "/quotascale-kwok-cloud", Address: ":8085", LeaderElect: true, ScanInterval: 10 * time.Second},
					kwokGroups: []string{"default-pool"},
					scheduler:  g,
					replicas:   map[string]int32{"quotascale-cluster-autoscaler": 1, "quotascale-scheduler": 1},
				}
				w.autoscalerAllowed, w.autoscalerDenied = chartAutoscalerAccess(ns)
				w.schedulerAllowed, w.schedulerDenied = chartSchedulerAccess(ns, "kube-system")
				return w
			},
		},
		{
			name: "monitoring-on",
			demo: true,
			values: `
monitoring:
  serviceMonitor:
    enabled: true
    labels: {release: prometheus}
  prometheusRule:
    enabled: true
    labels: {release: prometheus}
  grafanaDashboard:
    enabled: true
`,
			want: func(ns string) chartWant {
				w := chartWant{
					objects: chartObjectList(chartAutoscalerObjects(ns, true, true), chartSchedulerObjects(ns), []string{
						"ConfigMap " + ns + "/quotascale-dashboard",
						"PrometheusRule " + ns + "/quotascale",
						"ServiceMonitor " + ns + "/quotascale-cluster-autoscaler",
						"ServiceMonitor " + ns + "/quotascale-scheduler",
					}, chartMetricsReaderObjects(ns)),
					autoscaler: &chartAutoscalerFlags{CloudProvider: "kwok", CloudConfig: "configmap:" + ns + "/quotascale-cluster-autoscaler-kwok-config", Namespace: ns, KwokState: ns + "/quotascale-kwok-cloud", Address: ":8085", LeaderElect: true, ScanInterval: 10 * time.Second},
					kwokGroups: []string{"default-pool"},
					scheduler:  chartDefaultSchedulerGist(ns, "quotascale-scheduler"),
					replicas:   map[string]int32{"quotascale-cluster-autoscaler": 1, "quotascale-scheduler": 1},
				}
				w.autoscalerAllowed, w.autoscalerDenied = chartAutoscalerAccess(ns)
				w.schedulerAllowed, w.schedulerDenied = chartSchedulerAccess(ns, ns)
				w.metricsReaderAllowed, w.metricsReaderDenied = chartMetricsReaderAccess(ns)
				return w
			},
		},
		{
			name: "autoscaler-replicas-2",
			values: `
autoscaler:
  cloudProvider: kwok
  replicas: 2
  podDisruptionBudget:
    minAvailable: 1
  kwok:
    stateConfigMap: kwok-state
    nodeGroups:
      - name: n2-standard-2
        minSize: 0
        maxSize: 20
        labels: {cloud.google.com/machine-family: n2}
        taints: [{key: dedicated, value: batch, effect: NoSchedule}]
        capacity: {cpu: "2", memory: 8Gi}
        allocatable: {cpu: 1930m}
        provisioningDelay: 10s
      - name: gpu
        maxSize: 4
        capacity: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "1"}
scheduler:
  enabled: false
`,
			want: func(ns string) chartWant {
				w := chartWant{
					objects:    chartObjectList(chartAutoscalerObjects(ns, true, true)),
					autoscaler: &chartAutoscalerFlags{CloudProvider: "kwok", CloudConfig: "configmap:" + ns + "/quotascale-cluster-autoscaler-kwok-config", Namespace: ns, KwokState: ns + "/kwok-state", Address: ":8085", LeaderElect: true, ScanInterval: 10 * time.Second},
					kwokGroups: []string{"gpu", "n2-standard-2"},
					replicas:   map[string]int32{"quotascale-cluster-autoscaler": 2},
					spread:     []string{"quotascale-cluster-autoscaler"},
				}
				w.autoscalerAllowed, w.autoscalerDenied = chartAutoscalerAccess(ns)
				return w
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := createNamespace(t, ctx, "")
			chartRestrictPodSecurity(t, ctx, ns)
			want := tc.want(ns)
			values := tc.values
			if tc.demo {
				values = chartMergeValues(t, chartDemoValues(t), values)
			}
			r, err := renderChart(ch, values, ns, caps)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			if diff := cmp.Diff(want.objects, r.keys()); diff != "" {
				t.Errorf("rendered objects (-want +got):\n%s", diff)
			}
			if r.notes == "" {
				t.Error("NOTES.txt rendered empty")
			}
			for _, o := range r.objects {
				if o.GetKind() == "Namespace" {
					t.Errorf("%s: the chart must not create namespaces", chartObjectKey(o))
				}
				if sel := o.GetLabels()["app.kubernetes.io/managed-by"]; sel != "Helm" {
					t.Errorf("%s: app.kubernetes.io/managed-by is %q", chartObjectKey(o), sel)
				}
			}

			checkChartNoRBACWildcards(t, r)
			checkChartSecurityContexts(t, r)
			checkChartServices(t, r)
			checkChartReplicas(t, r, want)
			autoscalerOpts := checkChartAutoscaler(t, r, want)
			checkChartScheduler(t, r, want)
			checkChartWebhook(t, r, ns, want)
			checkChartMonitoring(t, r, alerts, ch.Metadata.AppVersion)
			checkChartDashboard(t, r)
			if autoscalerOpts != nil {
				// The autoscaler exits at start unless its RBAC allows all it
				// checks for (app.CheckAccess): the chart must grant that too.
				// Those of the clusters the pod's ServiceAccount reaches: the
				// workload cluster without --kubeconfig, the management cluster
				// without --cloud-config when it is the workload cluster or
				// in-cluster (--clusterapi-cloud-config-authoritative).
				o := *autoscalerOpts
				workload, management := app.RequiredAccess(o)
				var own []app.Access
				if o.Kubeconfig == "" {
					own = workload
				}
				if o.CloudConfig == "" && (o.Kubeconfig == "" || o.ClusterAPICloudConfigAuthoritative) {
					own = slices.Concat(own, management)
				}
				for _, a := range own {
					want.autoscalerAllowed = append(want.autoscalerAllowed, rbacAccess{verb: a.Verb, group: a.Group,
						resource: a.Resource, subresource: a.Subresource, namespace: a.Namespace, name: a.Name})
				}
			}
			checkChartRBACGrants(t, ctx, r, ns, want)

			// The API server is the judge of every object: server-side apply,
			// dry run, so nothing is created. The CRDs exist already (localcluster
			// installed apis/crds); applying the chart's copies must be a no-op
			// that conflicts with nothing.
			dyn := chartWarningRecordingClient(t)
			for _, o := range append(append([]*unstructured.Unstructured{}, r.crds...), r.objects...) {
				if err := chartDryRunApply(ctx, dyn.client, o); err != nil {
					t.Errorf("%v", err)
				}
			}
			// Each Deployment's pod, as the ReplicaSet would create it, in a
			// namespace enforcing the restricted Pod Security Standard.
			for _, o := range r.objects {
				if o.GetKind() != "Deployment" {
					continue
				}
				d := chartFromUnstructured[appsv1.Deployment](t, o)
				pod := &corev1.Pod{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
					ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-dry-run", Namespace: d.Namespace, Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
					Spec:       d.Spec.Template.Spec,
				}
				raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
				if err != nil {
					t.Fatal(err)
				}
				if err := chartDryRunApply(ctx, dyn.client, &unstructured.Unstructured{Object: raw}); err != nil {
					t.Errorf("the pod of %s: %v", chartObjectKey(o), err)
				}
			}
			if w := dyn.warnings(); len(w) > 0 {
				t.Errorf("the API server warned:\n%s", strings.Join(w, "\n"))
			}
		})
	}
}

func chartDefaultSchedulerGist(ns, profile string) *chartSchedulerGist {
	return &chartSchedulerGist{
		ProfileNames: []string{profile},
		LeaderElect:  true,
		LeaseName:    "quotascale-scheduler",
		LeaseNS:      ns,
		MultiPoint:   []string{capacityscheduling.Name},
		// As docs/scheduler-config.yaml: CapacityScheduling's PostFilter preempts.
		PostFilterDisabled: []string{"DefaultPreemption"},
		Args: capacityscheduling.Args{
			StatusUpdateInterval:      &metav1.Duration{Duration: 2 * time.Second},
			MinCandidateNodesAbsolute: ptr.To[int32](100),
			Webhook: &capacityscheduling.WebhookArgs{BindAddress: ":9443",
				CertFile: "/etc/quotascale/webhook/tls.crt", KeyFile: "/etc/quotascale/webhook/tls.key"},
		},
		SchedulerDeployment:  "quotascale-scheduler",
		ConfigMapName:        "quotascale-scheduler-config",
		ConfigMapKey:         "scheduler-config.yaml",
		SchedulerSecurePorts: []int32{10259},
	}
}

func chartRemarshal(t *testing.T, in, out any) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
}
