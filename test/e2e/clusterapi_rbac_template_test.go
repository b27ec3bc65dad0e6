package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/localcluster"
)

// restrictedIdentity is a user granted exactly app.RequiredAccess(opts) (the
// rules upstream's chart grants and ours adds), without any rule for the
// infrastructure machine templates, and a config that impersonates it.
func restrictedIdentity(t *testing.T, ctx context.Context, name string, workload, management []app.Access) *restclient.Config {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, a := range append(workload, management...) {
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		rules = append(rules, rbacv1.PolicyRule{Verbs: []string{a.Verb}, APIGroups: []string{a.Group}, Resources: []string{resource}})
	}
	rbac := cluster.Client.RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	cfg := restclient.CopyConfig(cluster.Config)
	cfg.Impersonate = restclient.ImpersonationConfig{UserName: name}
	return cfg
}

// recordedLogs keeps every log line of a logger.
type recordedLogs struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordedLogs) matching(substr string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestClusterAPIUnreadableTemplateKind (issue 25, item 2): the autoscaler's
// identity has every rule it needs but none for KwokMachineTemplates. Five
// MachineDeployments at zero replicas have the capacity annotations. Every
// loop over them finishes in under 5 seconds (before, each waited a minute
// for the template informer that never syncs), each group scales from zero
// for its pending pod, and the unreadable kind is logged once per back-off,
// not per loop.
func TestClusterAPIUnreadableTemplateKind(t *testing.T) {
	ctx := testContext(t)
	e := newCAPIEnv(t, ctx, clusterAPI(t))
	const groups = 5
	for i := range groups {
		name := fmt.Sprintf("g%d", i)
		_, err := e.capi.CreateMachineDeployment(ctx, localcluster.MachineDeploymentGroup{
			Namespace: e.ns, Name: name, ClusterName: e.cluster, MinSize: 0, MaxSize: 2,
			Machine:          kwokMachine("2", "8Gi", "", "", map[string]string{"e2e-rbac-template": name}),
			ExtraAnnotations: map[string]string{clusterapi.CPUAnnotation: "2", clusterapi.MemoryAnnotation: "8Gi"},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	opts := e.options(t)
	workload, management := app.RequiredAccess(opts)
	cfg := restrictedIdentity(t, ctx, "e2e-restricted-"+e.ns, workload, management)
	// The identity really may not read the templates.
	denied, err := cluster.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, subjectReview("e2e-restricted-"+e.ns, "list", localcluster.InfrastructureGroup, localcluster.KwokMachineTemplates.Resource), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if denied.Status.Allowed {
		t.Fatal("the restricted identity may list KwokMachineTemplates")
	}

	logs := &recordedLogs{}
	logger := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.lines = append(logs.lines, prefix+" "+args)
	}, funcr.Options{})
	runCtx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	t.Cleanup(cancel)
	a, err := app.New(runCtx, opts, cfg, app.NewProcess(opts))
	if err != nil {
		t.Fatal(err)
	}
	for i := range groups {
		name := fmt.Sprintf("g%d", i)
		createPods(t, ctx, e.ns, name, 1, "1500m", map[string]string{"e2e-rbac-template": name})
	}
	waitUnschedulable(t, ctx, e.ns, groups)

	const failure = "Cannot read infrastructure objects of this kind"
	var durations []time.Duration
	started := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		start := time.Now()
		if err := a.RunOnce(runCtx); err != nil {
			return false, err
		}
		durations = append(durations, time.Since(start).Round(time.Millisecond))
		got, err := runningPerNamespace(ctx, []string{e.ns})
		return err == nil && got[0] == groups && len(durations) >= 5, err
	})
	if err != nil {
		t.Fatalf("after %d loops: %v", len(durations), err)
	}
	loops := len(durations)
	t.Logf("loop durations: %v", durations)
	// The acceptance bound, on the first loop, which sees all five groups at
	// zero replicas (each used to wait a minute for the template informer);
	// later loops also wait for their scale-ups' writes to be seen.
	if durations[0] >= 5*time.Second {
		t.Errorf("the first loop over the %d groups at zero replicas took %s, want under 5s", groups, durations[0])
	}
	for name, r := range e.replicas(t, ctx) {
		if r != 1 {
			t.Errorf("%s has %d replicas, want 1 for its pod", name, r)
		}
	}
	// One line per back-off: the first lasts 30s, each next one twice longer.
	backoffs := 1
	for elapsed, b := time.Since(started), 30*time.Second; elapsed > b; b *= 2 {
		elapsed -= b
		backoffs++
	}
	// The provider also reads pending Machines' infrastructure machines
	// (KwokMachine), which this user cannot read either; that kind has its own
	// back-off and line. This test is about the templates' kind.
	var lines []string
	for _, line := range logs.matching(failure) {
		if strings.Contains(line, `"kind"="KwokMachineTemplate.`) {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 || len(lines) > backoffs {
		t.Errorf("over %d loops in %s the unreadable kind was logged %d times, want 1 to %d:\n%s",
			loops, time.Since(started).Round(time.Second), len(lines), backoffs, strings.Join(lines, "\n"))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "forbidden") {
		t.Errorf("the log does not say why the kind is unreadable:\n%s", strings.Join(lines, "\n"))
	}
}

// subjectReview asks whether user may verb resource.group.
func subjectReview(user, verb, group, resource string) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource},
	}}
}
