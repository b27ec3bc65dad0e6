package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate/api"
)

// upstreamRBAC are upstream's chart's ClusterRole and Role (test data), and the
// rules docs/migrating-from-upstream.md says to add.
func upstreamRBAC(t *testing.T) (clusterRole *rbacv1.ClusterRole, role *rbacv1.Role, extra []rbacv1.PolicyRule) {
	t.Helper()
	docs := bytes.Split(readTestdata(t, "upstream-chart/rbac.yaml"), []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("upstream-chart/rbac.yaml has %d documents, want a ClusterRole and a Role", len(docs))
	}
	clusterRole, role = &rbacv1.ClusterRole{}, &rbacv1.Role{}
	if err := yaml.UnmarshalStrict(docs[0], clusterRole); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(docs[1], role); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(readTestdata(t, "upstream-chart/quotascale-rbac.yaml"), &extra); err != nil {
		t.Fatal(err)
	}
	return clusterRole, role, extra
}

// TestMigrationGuideRBACMatchesTestdata: the rules the guide tells users to add
// are the ones the e2e grants, word for word.
func TestMigrationGuideRBACMatchesTestdata(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join(repoRoot, "docs", "migrating-from-upstream.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules := readTestdata(t, "upstream-chart/quotascale-rbac.yaml")
	var body []string
	for _, line := range strings.Split(strings.TrimSpace(string(rules)), "\n") {
		if !strings.HasPrefix(line, "#") {
			body = append(body, "    "+line)
		}
	}
	if want := strings.Join(body, "\n"); !strings.Contains(string(guide), want) {
		t.Errorf("docs/migrating-from-upstream.md does not list the extra rules of testdata/upstream-chart/quotascale-rbac.yaml, indented under rbac.additionalRules:\n%s", want)
	}
}

// chartServiceAccount creates, in ns, a ServiceAccount bound to upstream's
// chart ClusterRole and Role, with extra rules added as the guide says (none
// when extra is nil) and the rules drop matches taken out, and kwok's own rules for the kwok cloud's state
// ConfigMap when kwokState is set; it returns a kubeconfig with the
// ServiceAccount's token (TokenRequest).
func chartServiceAccount(t *testing.T, ctx context.Context, ns string, extra []rbacv1.PolicyRule, drop func(rbacv1.PolicyRule) bool, kwokState string) string {
	t.Helper()
	clusterRole, role, _ := upstreamRBAC(t)
	name := "cluster-autoscaler"
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	rbac := cluster.Client.RbacV1()
	rules := func(base []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		out := slices.Concat(base, extra)
		if drop != nil {
			out = slices.DeleteFunc(out, drop)
		}
		return out
	}
	clusterRole.Name = ns + "-upstream"
	clusterRole.Rules = rules(clusterRole.Rules)
	role.Namespace = ns
	role.Rules = rules(role.Rules)
	if _, err := cluster.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, clusterRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterRole.Name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), clusterRole.Name, metav1.DeleteOptions{})
	})
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if kwokState != "" {
		// The kwok provider (tests and demos only) keeps its instances in a
		// ConfigMap of its own; our chart grants that, upstream's cannot.
		stateNS, stateName, _ := strings.Cut(kwokState, "/")
		kwokRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: ns + "-kwok", Namespace: stateNS}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{stateName}, Verbs: []string{"get", "update"}},
		}}
		if _, err := rbac.Roles(stateNS).Create(ctx, kwokRole, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kwokBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: kwokRole.Name, Namespace: stateNS}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: kwokRole.Name}}
		if _, err := rbac.RoleBindings(stateNS).Create(ctx, kwokBinding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rbac.RoleBindings(stateNS).Delete(context.Background(), kwokBinding.Name, metav1.DeleteOptions{})
			_ = rbac.Roles(stateNS).Delete(context.Background(), kwokRole.Name, metav1.DeleteOptions{})
		})
	}
	token, err := cluster.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cluster.Config.Host, CertificateAuthorityData: cluster.Config.CAData, TLSServerName: cluster.Config.ServerName}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// argumentList reads testdata/upstream-args/file, one argument per line,
// with ${NAME} replaced from vars.
func argumentList(t *testing.T, file string, vars map[string]string) []string {
	t.Helper()
	var args []string
	scanner := bufio.NewScanner(bytes.NewReader(readTestdata(t, filepath.Join("upstream-args", file))))
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		args = append(args, os.Expand(line, func(k string) string {
			v, ok := vars[k]
			if !ok {
				t.Fatalf("%s: no value for ${%s}", file, k)
			}
			return v
		}))
	}
	return args
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// process is the real binary running.
type process struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	err    error
}

// lockedBuffer collects the process's stderr while tests read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{} }
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(autoscalerBinary(t), args...)
	cmd.Dir = "/"
	return startProcess(t, cmd)
}

// startProcess starts cmd, which runs the binary, and stops it with SIGTERM
// when the test ends, showing its output if the test failed.
func startProcess(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{cmd: cmd, out: newLockedBuffer(), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%q:\n%s", p.cmd.Args, p.out.String())
		}
	})
	return p
}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// upstreamMetrics are upstream's cluster_autoscaler_* metrics issue 15 names,
// with their type and labels as upstream's pkg/metrics registers them.
var upstreamMetrics = map[string]struct {
	typ    string
	labels []string
}{
	"cluster_autoscaler_cluster_safe_to_autoscale":    {"gauge", nil},
	"cluster_autoscaler_nodes_count":                  {"gauge", []string{"state"}},
	"cluster_autoscaler_node_groups_count":            {"gauge", []string{"node_group_type"}},
	"cluster_autoscaler_unschedulable_pods_count":     {"gauge", []string{"type"}},
	"cluster_autoscaler_last_activity":                {"gauge", []string{"activity"}},
	"cluster_autoscaler_function_duration_seconds":    {"histogram", []string{"function"}},
	"cluster_autoscaler_errors_total":                 {"counter", []string{"type"}},
	"cluster_autoscaler_scaled_up_nodes_total":        {"counter", []string{"dra_drivers", "gpu_name", "gpu_resource_name"}},
	"cluster_autoscaler_scaled_down_nodes_total":      {"counter", []string{"dra_drivers", "gpu_name", "gpu_resource_name", "reason"}},
	"cluster_autoscaler_failed_scale_ups_total":       {"counter", []string{"dra_drivers", "gpu_name", "gpu_resource_name", "reason"}},
	"cluster_autoscaler_unneeded_nodes_count":         {"gauge", nil},
	"cluster_autoscaler_max_nodes_count":              {"gauge", nil},
	"cluster_autoscaler_cluster_cpu_current_cores":    {"gauge", nil},
	"cluster_autoscaler_cluster_memory_current_bytes": {"gauge", nil},
	"cluster_autoscaler_skipped_scale_events_count":   {"counter", []string{"direction", "reason"}},
}

// checkUpstreamMetrics reads /metrics: every metric above is there with its
// type and labels, nodes_count has upstream's states, and
// skipped_scale_events_count upstream's cpu and memory reasons.
func checkUpstreamMetrics(t *testing.T, ctx context.Context, addr string, perNodeGroup bool) {
	t.Helper()
	code, body, err := get(ctx, "http://"+addr+"/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	for name, want := range upstreamMetrics {
		f, ok := families[name]
		if !ok {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != want.typ {
			t.Errorf("%s is a %s, upstream's a %s", name, got, want.typ)
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			sort.Strings(labels)
			if strings.Join(labels, ",") != strings.Join(want.labels, ",") {
				t.Errorf("%s has labels %v, upstream's %v", name, labels, want.labels)
				break
			}
		}
	}
	values := func(name, label string) []string {
		var out []string
		for _, m := range families[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out = append(out, l.GetValue())
				}
			}
		}
		sort.Strings(out)
		return out
	}
	if got := strings.Join(values("cluster_autoscaler_nodes_count", "state"), ","); got != "longUnregistered,notStarted,ready,suspended,unready,unregistered" {
		t.Errorf("nodes_count states %s", got)
	}
	if got := strings.Join(values("cluster_autoscaler_skipped_scale_events_count", "reason"), ","); !strings.Contains(got, "CpuResourceLimit") || !strings.Contains(got, "MemoryResourceLimit") {
		t.Errorf("skipped_scale_events_count reasons %s", got)
	}
	if _, ok := families["cluster_autoscaler_node_group_target_count"]; ok != perNodeGroup {
		t.Errorf("node_group_target_count exported %v with --emit-per-nodegroup-metrics=%v", ok, perNodeGroup)
	}
}

const upstreamKwokGroups = `nodeGroups:
- name: e2e-kwok-upstream-a
  minSize: 0
  maxSize: 3
  labels: {topology.kubernetes.io/zone: a}
  capacity: {cpu: "4", memory: 16Gi}
- name: e2e-kwok-upstream-b
  minSize: 0
  maxSize: 3
  labels: {topology.kubernetes.io/zone: b}
  capacity: {cpu: "4", memory: 16Gi}
`

// TestUpstreamChartArguments runs the real binary, as upstream's chart
// would with our image, on argument lists in the style of the chart's
// defaults and common public values (testdata/upstream-args), under a
// ServiceAccount bound to upstream's chart RBAC plus the documented rules
// only. Each run reaches a healthy /health-check as the leader, writes the
// status ConfigMap in upstream's format with the cluster Healthy, and
// exports upstream's metrics after its first loop.
func TestUpstreamChartArguments(t *testing.T) {
	ctx := testContext(t)
	clusterAPI(t) // Cluster API's CRDs and controllers, for the clusterapi argument lists
	_, _, extra := upstreamRBAC(t)
	files, err := os.ReadDir(filepath.Join("testdata", "upstream-args"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d argument lists, want at least five", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(f.Name(), ".args"), func(t *testing.T) {
			ns := createNamespace(t, ctx, "")
			vars := map[string]string{"NAMESPACE": ns}
			raw := string(readTestdata(t, filepath.Join("upstream-args", f.Name())))
			kwokState := ""
			if strings.Contains(raw, "--cloud-provider=kwok") {
				cloud := startKwokCloud(t, ctx, upstreamKwokGroups)
				vars["KWOK_CONFIG"] = "configmap:kube-system/" + cloud.configName
				kwokState = "kube-system/" + cloud.stateName
				vars["KWOK_STATE"] = kwokState
			}
			args := argumentList(t, f.Name(), vars)
			kubeconfig := chartServiceAccount(t, ctx, ns, extra, nil, kwokState)
			addr := freeAddress(t)
			p := startBinary(t, append(args, "--kubeconfig="+kubeconfig, "--address="+addr)...)
			statusName := api.StatusConfigMapName
			waitFor(t, ctx, "a healthy leader that wrote its status", func(ctx context.Context) error {
				select {
				case <-p.exited:
					t.Fatalf("the autoscaler exited: %v", p.err)
				default:
				}
				code, body, err := get(ctx, "http://"+addr+"/health-check")
				if err != nil || code != http.StatusOK || strings.Contains(body, "standby") {
					return fmt.Errorf("/health-check: %d %q %v", code, body, err)
				}
				cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, statusName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				s, err := api.ParseStatus(cm.Data[api.StatusConfigMapKey])
				if err != nil {
					return err
				}
				if s.AutoscalerStatus != api.Running || s.ClusterWide.Health.Status != api.Healthy {
					return fmt.Errorf("status %s, health %q", s.AutoscalerStatus, s.ClusterWide.Health.Status)
				}
				if cm.Annotations[api.LastUpdatedAnnotation] != s.Time {
					return fmt.Errorf("last-updated %q, time %q", cm.Annotations[api.LastUpdatedAnnotation], s.Time)
				}
				return nil
			})
			checkUpstreamMetrics(t, ctx, addr, strings.Contains(raw, "--emit-per-nodegroup-metrics=true"))
		})
	}
}

// TestMissingRBACExits: with a rule missing from upstream's chart RBAC plus
// the documented additions, the binary exits at start naming each request it
// may not make (verb and resource), serves no /health-check, neither healthy
// nor standby, and writes no status.
func TestMissingRBACExits(t *testing.T) {
	ctx := testContext(t)
	_, _, extra := upstreamRBAC(t)
	grants := func(r rbacv1.PolicyRule, resource string) bool { return slices.Contains(r.Resources, resource) }
	for _, tc := range []struct {
		name  string
		extra []rbacv1.PolicyRule
		drop  func(rbacv1.PolicyRule) bool
		want  []string
	}{{
		name: "upstream-chart-alone",
		want: []string{
			"list elasticquotatrees.scheduling.sigs.k8s.io", "watch elasticquotatrees.scheduling.sigs.k8s.io",
			"list resourceflavors.kueue.x-k8s.io", "watch resourceflavors.kueue.x-k8s.io",
			// localcluster serves the Workload API.
			"list podgroups.scheduling.k8s.io", "watch podgroups.scheduling.k8s.io",
			// DRADeviceTaintRules is on by default.
			"list devicetaintrules.resource.k8s.io", "watch devicetaintrules.resource.k8s.io",
			"patch machines.cluster.x-k8s.io",
			"get machinesets/scale.cluster.x-k8s.io", "update machinesets/scale.cluster.x-k8s.io",
		},
	}, {
		name:  "without-resourceflavors",
		extra: extra,
		drop:  func(r rbacv1.PolicyRule) bool { return grants(r, "resourceflavors") },
		want:  []string{"list resourceflavors.kueue.x-k8s.io", "watch resourceflavors.kueue.x-k8s.io"},
	}, {
		// Upstream's chart before 9.59.0 has no CapacityQuota rules.
		name:  "without-capacityquotas",
		extra: extra,
		drop: func(r rbacv1.PolicyRule) bool {
			return grants(r, "capacityquotas") || grants(r, "capacityquotas/status")
		},
		want: []string{
			"list capacityquotas.autoscaling.x-k8s.io", "watch capacityquotas.autoscaling.x-k8s.io",
			"update capacityquotas/status.autoscaling.x-k8s.io",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := createNamespace(t, ctx, "")
			kubeconfig := chartServiceAccount(t, ctx, ns, tc.extra, tc.drop, "")
			addr := freeAddress(t)
			p := startBinary(t, "--cloud-provider=clusterapi", "--namespace="+ns, "--kubeconfig="+kubeconfig, "--address="+addr)
			err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
				select {
				case <-p.exited:
					return true, nil
				default:
				}
				if code, body, err := get(ctx, "http://"+addr+"/health-check"); err == nil {
					return false, fmt.Errorf("/health-check answered %d %q while a rule is missing", code, body)
				}
				return false, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.err == nil {
				t.Fatal("exited 0")
			}
			denied := deniedRequests(p.out.String())
			if diff := cmp.Diff(tc.want, denied, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("requests named as denied (-want +got):\n%s\n%s", diff, p.out.String())
			}
			if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, api.StatusConfigMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a status ConfigMap was written: %v", err)
			}
		})
	}
}

// deniedRequests reads the requests the autoscaler's start-up error names,
// from "may not A; B; C: add these rules".
func deniedRequests(out string) []string {
	_, rest, ok := strings.Cut(out, "credentials may not ")
	if !ok {
		return nil
	}
	list, _, _ := strings.Cut(rest, ": add these rules")
	return strings.Split(list, "; ")
}
