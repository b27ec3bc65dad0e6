package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedulervalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// checkSecurityContexts: every pod runs as non-root with the RuntimeDefault
// seccomp profile, and every container also has a read-only root, no privilege
// escalation and no capability.
func checkChartSecurityContexts(t *testing.T, r *chartRendering) {
	t.Helper()
	type podSC struct {
		RunAsNonRoot *bool
		Seccomp      *corev1.SeccompProfile
	}
	type containerSC struct {
		RunAsNonRoot             *bool
		ReadOnlyRootFilesystem   *bool
		AllowPrivilegeEscalation *bool
		Privileged               *bool
		Drop                     []corev1.Capability
		Add                      []corev1.Capability
		Seccomp                  *corev1.SeccompProfile
	}
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	wantPod := podSC{RunAsNonRoot: ptr.To(true), Seccomp: runtimeDefault}
	wantContainer := containerSC{
		RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
		Privileged: ptr.To(false), Drop: []corev1.Capability{"ALL"}, Seccomp: runtimeDefault,
	}
	pods := 0
	for _, o := range r.objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		pods++
		spec := chartFromUnstructured[appsv1.Deployment](t, o).Spec.Template.Spec
		var gotPod podSC
		if sc := spec.SecurityContext; sc != nil {
			gotPod = podSC{RunAsNonRoot: sc.RunAsNonRoot, Seccomp: sc.SeccompProfile}
		}
		if diff := cmp.Diff(wantPod, gotPod); diff != "" {
			t.Errorf("%s pod securityContext (-want +got):\n%s", chartObjectKey(o), diff)
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("%s uses host namespaces", chartObjectKey(o))
		}
		containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
		for _, c := range containers {
			var got containerSC
			if sc := c.SecurityContext; sc != nil {
				got = containerSC{RunAsNonRoot: sc.RunAsNonRoot, ReadOnlyRootFilesystem: sc.ReadOnlyRootFilesystem,
					AllowPrivilegeEscalation: sc.AllowPrivilegeEscalation, Privileged: sc.Privileged, Seccomp: sc.SeccompProfile}
				if sc.Capabilities != nil {
					got.Drop, got.Add = sc.Capabilities.Drop, sc.Capabilities.Add
				}
			}
			if diff := cmp.Diff(wantContainer, got); diff != "" {
				t.Errorf("%s container %s securityContext (-want +got):\n%s", chartObjectKey(o), c.Name, diff)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s container %s: cpu and memory requests and a memory limit are expected, got %v", chartObjectKey(o), c.Name, c.Resources)
			}
		}
	}
	if pods == 0 {
		t.Error("no Deployment rendered")
	}
}

// checkServices: every Service selects the pods of one Deployment and targets
// a named port of its container; every ServiceMonitor selects a Service and
// scrapes one of its ports.
func checkChartServices(t *testing.T, r *chartRendering) {
	t.Helper()
	type target struct {
		labels labels.Set
		ports  map[string]bool
	}
	var deployments []target
	for _, o := range r.objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := chartFromUnstructured[appsv1.Deployment](t, o)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: its selector does not match its pods (%v)", chartObjectKey(o), err)
		}
		ports := map[string]bool{}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				ports[p.Name] = true
			}
		}
		deployments = append(deployments, target{labels: d.Spec.Template.Labels, ports: ports})
	}
	services := map[string]*corev1.Service{}
	for _, o := range r.objects {
		if o.GetKind() != "Service" {
			continue
		}
		s := chartFromUnstructured[corev1.Service](t, o)
		services[s.Name] = s
		matched := 0
		for _, d := range deployments {
			if !labels.SelectorFromSet(s.Spec.Selector).Matches(d.labels) {
				continue
			}
			matched++
			for _, p := range s.Spec.Ports {
				if p.TargetPort.Type != intstr.String || !d.ports[p.TargetPort.StrVal] {
					t.Errorf("%s port %s: target %s is not a named container port", chartObjectKey(o), p.Name, p.TargetPort.String())
				}
			}
		}
		if matched != 1 {
			t.Errorf("%s selects the pods of %d Deployments, want 1", chartObjectKey(o), matched)
		}
	}
	for _, o := range r.objects {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		var spec struct {
			Selector  metav1.LabelSelector `json:"selector"`
			Endpoints []struct {
				Port   string `json:"port"`
				Scheme string `json:"scheme"`
				Path   string `json:"path"`
			} `json:"endpoints"`
		}
		chartRemarshal(t, o.Object["spec"], &spec)
		sel, err := metav1.LabelSelectorAsSelector(&spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		var found *corev1.Service
		for _, s := range services {
			if sel.Matches(labels.Set(s.Labels)) {
				if found != nil {
					t.Errorf("%s selects more than one Service", chartObjectKey(o))
				}
				found = s
			}
		}
		if found == nil {
			t.Errorf("%s selects no Service", chartObjectKey(o))
			continue
		}
		for _, e := range spec.Endpoints {
			ok := false
			for _, p := range found.Spec.Ports {
				ok = ok || p.Name == e.Port
			}
			if !ok || e.Path != "/metrics" || e.Scheme != strings.SplitN(e.Port, "-", 2)[0] {
				t.Errorf("%s endpoint %+v does not match Service %s", chartObjectKey(o), e, found.Name)
			}
		}
	}
}

func checkChartReplicas(t *testing.T, r *chartRendering, want chartWant) {
	t.Helper()
	got := map[string]int32{}
	var spread []string
	for _, o := range r.objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := chartFromUnstructured[appsv1.Deployment](t, o)
		got[d.Name] = ptr.Deref(d.Spec.Replicas, 1)
		if d.Spec.Template.Spec.Affinity != nil && d.Spec.Template.Spec.Affinity.PodAntiAffinity != nil {
			spread = append(spread, d.Name)
		}
		if d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
			t.Errorf("%s: priorityClassName %q", chartObjectKey(o), d.Spec.Template.Spec.PriorityClassName)
		}
		if sa := d.Spec.Template.Spec.ServiceAccountName; r.find("ServiceAccount", sa) == nil {
			t.Errorf("%s: ServiceAccount %q is not rendered", chartObjectKey(o), sa)
		}
	}
	if diff := cmp.Diff(want.replicas, got); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.spread, spread); diff != "" {
		t.Errorf("Deployments with the default anti-affinity (-want +got):\n%s", diff)
	}
	for _, o := range r.objects {
		if o.GetKind() != "PodDisruptionBudget" {
			continue
		}
		pdb := chartFromUnstructured[policyv1.PodDisruptionBudget](t, o)
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("%s: exactly one of minAvailable and maxUnavailable expected: %+v", chartObjectKey(o), pdb.Spec)
		}
		if d := r.find("Deployment", pdb.Name); d == nil {
			t.Errorf("%s protects no Deployment of the same name", chartObjectKey(o))
		} else if sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); !sel.Matches(labels.Set(chartFromUnstructured[appsv1.Deployment](t, d).Spec.Template.Labels)) {
			t.Errorf("%s does not select the pods of %s", chartObjectKey(o), d.GetName())
		}
	}
}

// chartAutoscalerCommand is the autoscaler container's command in our chart:
// upstream's, relative to the image's working directory (TestAutoscalerImageLayout).
const chartAutoscalerCommand = "./cluster-autoscaler"

// checkAutoscaler parses the autoscaler's command line as cluster-autoscaler/main.go
// does (refusals and validation included), and parses the
// kwok config it points at with the kwok provider's parser. It returns the
// parsed options (nil when the autoscaler is off).
func checkChartAutoscaler(t *testing.T, r *chartRendering, want chartWant) *config.Options {
	t.Helper()
	d := r.find("Deployment", "quotascale-cluster-autoscaler")
	if want.autoscaler == nil {
		if d != nil {
			t.Error("the autoscaler is rendered, but should not be")
		}
		return nil
	}
	if d == nil {
		t.Fatal("no autoscaler Deployment")
	}
	c := chartFromUnstructured[appsv1.Deployment](t, d).Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{chartAutoscalerCommand}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	opts := config.Defaults()
	warnings, err := app.NewCommandLine(&opts).Parse(c.Args)
	if err != nil {
		t.Fatalf("the autoscaler's flags %q are refused: %v", c.Args, err)
	}
	if len(warnings) > 0 {
		t.Errorf("the autoscaler's flags %q set flags that have no effect: %q", c.Args, warnings)
	}
	got := chartAutoscalerFlags{CloudProvider: opts.CloudProviderName, CloudConfig: opts.CloudConfig, Namespace: opts.Namespace,
		KwokState: opts.KwokState, Address: opts.Address, LeaderElect: opts.LeaderElect, ScanInterval: opts.ScanInterval,
		Kubeconfig: opts.Kubeconfig, Authoritative: opts.ClusterAPICloudConfigAuthoritative, NodeGroupAutoDiscovery: opts.NodeGroupAutoDiscovery}
	if diff := cmp.Diff(*want.autoscaler, got); diff != "" {
		t.Errorf("autoscaler flags (-want +got):\n%s", diff)
	}
	probe := c.LivenessProbe
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/health-check" || probe.HTTPGet.Port.StrVal != "http-metrics" {
		t.Errorf("liveness probe %+v, want GET /health-check on http-metrics", probe)
	}
	if len(c.Ports) != 1 || fmt.Sprintf(":%d", c.Ports[0].ContainerPort) != opts.Address {
		t.Errorf("container ports %+v do not match --address=%s", c.Ports, opts.Address)
	}

	var groups []string
	if opts.CloudProviderName == kwok.ProviderName {
		ref := strings.TrimPrefix(opts.CloudConfig, "configmap:")
		ns, name, _ := strings.Cut(ref, "/")
		cm := r.find("ConfigMap", name)
		if cm == nil || cm.GetNamespace() != ns {
			t.Fatalf("--cloud-config=%s names no rendered ConfigMap", opts.CloudConfig)
		}
		data := chartFromUnstructured[corev1.ConfigMap](t, cm).Data[kwok.DefaultConfigKey]
		cfg, err := kwok.ParseConfig([]byte(data))
		if err != nil {
			t.Fatalf("the kwok config does not parse:\n%s\n%v", data, err)
		}
		for _, g := range cfg.NodeGroups {
			groups = append(groups, g.Name)
		}
		sort.Strings(groups)
	}
	if diff := cmp.Diff(want.kwokGroups, groups); diff != "" {
		t.Errorf("kwok node groups (-want +got):\n%s", diff)
	}
	return &opts
}

// checkScheduler decodes the KubeSchedulerConfiguration with the scheduler's
// own strict codec, validates it as kube-scheduler does, and checks the
// Deployment mounts it where --config points.
func checkChartScheduler(t *testing.T, r *chartRendering, want chartWant) {
	t.Helper()
	d := r.find("Deployment", "quotascale-scheduler")
	if want.scheduler == nil {
		if d != nil {
			t.Error("the scheduler is rendered, but should not be")
		}
		return
	}
	if d == nil {
		t.Fatal("no scheduler Deployment")
	}
	spec := chartFromUnstructured[appsv1.Deployment](t, d).Spec.Template.Spec
	c := spec.Containers[0]
	if !slices.Contains(c.Args, "--config="+schedulerCfgPath) {
		t.Errorf("args %q lack --config=%s", c.Args, schedulerCfgPath)
	}
	var cmName, key string
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(schedulerCfgPath) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cmName, key = v.ConfigMap.Name, path.Base(schedulerCfgPath)
			}
		}
	}
	cm := r.find("ConfigMap", cmName)
	if cm == nil {
		t.Fatalf("--config=%s is not a mounted, rendered ConfigMap", schedulerCfgPath)
	}
	data, ok := chartFromUnstructured[corev1.ConfigMap](t, cm).Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cmName, key)
	}
	obj, _, err := schedulerscheme.Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	if err != nil {
		t.Fatalf("the scheduler config does not decode:\n%s\n%v", data, err)
	}
	cfg := obj.(*schedulerapi.KubeSchedulerConfiguration)
	if err := schedulervalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Errorf("the scheduler config is invalid: %v", err)
	}
	got := chartSchedulerGist{
		LeaderElect: cfg.LeaderElection.LeaderElect, LeaseName: cfg.LeaderElection.ResourceName, LeaseNS: cfg.LeaderElection.ResourceNamespace,
		SchedulerDeployment: d.GetName(), ConfigMapName: cmName, ConfigMapKey: key,
	}
	for _, p := range cfg.Profiles {
		got.ProfileNames = append(got.ProfileNames, p.SchedulerName)
		if p.Plugins != nil {
			for _, pl := range p.Plugins.MultiPoint.Enabled {
				if pl.Name == capacityscheduling.Name {
					got.MultiPoint = append(got.MultiPoint, pl.Name)
				}
			}
			for _, pl := range p.Plugins.PostFilter.Disabled {
				got.PostFilterDisabled = append(got.PostFilterDisabled, pl.Name)
			}
		}
		for _, pc := range p.PluginConfig {
			if pc.Name != capacityscheduling.Name {
				continue
			}
			u, ok := pc.Args.(*runtime.Unknown)
			if !ok {
				t.Fatalf("CapacityScheduling args decoded as %T", pc.Args)
			}
			dec := json.NewDecoder(bytes.NewReader(u.Raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got.Args); err != nil {
				t.Errorf("CapacityScheduling args %s: %v", u.Raw, err)
			}
		}
	}
	for _, p := range c.Ports {
		switch p.Name {
		case "https-webhook":
			if got.Args.Webhook == nil || got.Args.Webhook.BindAddress != fmt.Sprintf(":%d", p.ContainerPort) {
				t.Errorf("container port %d is not the webhook's bindAddress (%+v)", p.ContainerPort, got.Args.Webhook)
			}
			continue
		}
		got.SchedulerSecurePorts = append(got.SchedulerSecurePorts, p.ContainerPort)
		if !slices.Contains(c.Args, fmt.Sprintf("--secure-port=%d", p.ContainerPort)) {
			t.Errorf("container port %d is not --secure-port", p.ContainerPort)
		}
	}
	if diff := cmp.Diff(*want.scheduler, got); diff != "" {
		t.Errorf("scheduler configuration (-want +got):\n%s", diff)
	}
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("probe %+v, want an HTTPS GET", probe)
		}
	}
}

// checkMonitoring: the PrometheusRule carries files/alerts.yaml's rules, with
// their runbook links pinned to the chart's app version.
func checkChartMonitoring(t *testing.T, r *chartRendering, alerts []byte, appVersion string) {
	t.Helper()
	rule := r.find("PrometheusRule", chartRelease)
	if rule == nil {
		return
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(alerts), "/blob/main/docs/runbooks/", "/blob/"+appVersion+"/docs/runbooks/")), &want); err != nil {
		t.Fatal(err)
	}
	// Both through JSON, so that numbers and nesting compare alike.
	var wantSpec, gotSpec map[string]any
	chartRemarshal(t, want, &wantSpec)
	chartRemarshal(t, rule.Object["spec"], &gotSpec)
	if diff := cmp.Diff(wantSpec, gotSpec); diff != "" {
		t.Errorf("PrometheusRule spec differs from files/alerts.yaml (-want +got):\n%s", diff)
	}
	if rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack the configured ones", rule.GetLabels())
	}
}
