package e2e

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// rbacAccess is one API request a program makes. It is kept apart from
// app.Access on purpose: this checker must not share the code it checks.
type rbacAccess struct {
	verb, group, resource, subresource, namespace, name string
	// path makes it a non-resource request, such as a scrape of /metrics.
	path string
}

func (a rbacAccess) String() string {
	if a.path != "" {
		return a.verb + " " + a.path
	}
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	s := a.verb + " " + r
	if a.name != "" {
		s += " " + a.name
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	}
	return s
}

func chartAutoscalerAccess(ns string) (allowed, denied []rbacAccess) {
	read := func(group string, resources ...string) []rbacAccess {
		var out []rbacAccess
		for _, r := range resources {
			for _, v := range []string{"get", "list", "watch"} {
				out = append(out, rbacAccess{verb: v, group: group, resource: r})
			}
		}
		return out
	}
	allowed = append(allowed, read("", "nodes", "pods", "namespaces", "services", "replicationcontrollers", "persistentvolumes", "persistentvolumeclaims")...)
	allowed = append(allowed, read("apps", "replicasets", "statefulsets")...)
	allowed = append(allowed, read("policy", "poddisruptionbudgets")...)
	allowed = append(allowed, read("storage.k8s.io", "storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments")...)
	allowed = append(allowed, read("resource.k8s.io", "resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules")...)
	allowed = append(allowed, read("autoscaling.x-k8s.io", "capacityquotas")...)
	allowed = append(allowed, read("scheduling.sigs.k8s.io", "elasticquotatrees")...)
	allowed = append(allowed, read("kueue.x-k8s.io", "resourceflavors")...)
	allowed = append(allowed,
		rbacAccess{verb: "update", resource: "nodes", name: "n1"},
		rbacAccess{verb: "patch", resource: "nodes", name: "n1"},
		rbacAccess{verb: "delete", resource: "nodes", name: "n1"},
		rbacAccess{verb: "create", resource: "pods", subresource: "eviction", namespace: "team-a", name: "p"},
		rbacAccess{verb: "create", resource: "events", namespace: "team-a"},
		rbacAccess{verb: "patch", resource: "events", namespace: "default"},
		rbacAccess{verb: "update", group: "autoscaling.x-k8s.io", resource: "capacityquotas", subresource: "status", name: "q"},
		// The release namespace: ConfigMaps (status, priority expander, kwok) and the lease.
		rbacAccess{verb: "list", resource: "configmaps", namespace: ns},
		rbacAccess{verb: "watch", resource: "configmaps", namespace: ns},
		rbacAccess{verb: "create", resource: "configmaps", namespace: ns},
		rbacAccess{verb: "get", resource: "configmaps", namespace: ns, name: "cluster-autoscaler-status"},
		rbacAccess{verb: "update", resource: "configmaps", namespace: ns, name: "cluster-autoscaler-status"},
		rbacAccess{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: ns},
		rbacAccess{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "cluster-autoscaler"},
		rbacAccess{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "cluster-autoscaler"},
	)
	denied = []rbacAccess{
		{verb: "get", resource: "secrets", namespace: ns, name: "x"},
		{verb: "list", resource: "secrets"},
		{verb: "create", resource: "pods", namespace: ns},
		{verb: "delete", resource: "pods", namespace: ns, name: "p"},
		{verb: "create", resource: "nodes"},
		{verb: "get", resource: "configmaps", namespace: "kube-system", name: "x"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "quotascale-scheduler"},
		{verb: "update", group: "scheduling.sigs.k8s.io", resource: "elasticquotatrees", subresource: "status", namespace: "kube-system", name: "t"},
		{verb: "update", group: "autoscaling.x-k8s.io", resource: "capacityquotas", name: "q"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
	}
	return allowed, denied
}

var chartClusterAPIAccess = []rbacAccess{
	{verb: "list", group: "cluster.x-k8s.io", resource: "machinedeployments"},
	{verb: "watch", group: "cluster.x-k8s.io", resource: "machinesets"},
	{verb: "watch", group: "cluster.x-k8s.io", resource: "machinepools"},
	{verb: "update", group: "cluster.x-k8s.io", resource: "machinepools", subresource: "scale", namespace: "capi", name: "mp"},
	{verb: "get", group: "cluster.x-k8s.io", resource: "machines", namespace: "capi", name: "m"},
	{verb: "get", group: "cluster.x-k8s.io", resource: "machinedeployments", subresource: "scale", namespace: "capi", name: "md"},
	{verb: "update", group: "cluster.x-k8s.io", resource: "machinedeployments", subresource: "scale", namespace: "capi", name: "md"},
	{verb: "update", group: "cluster.x-k8s.io", resource: "machinesets", subresource: "scale", namespace: "capi", name: "ms"},
	{verb: "patch", group: "cluster.x-k8s.io", resource: "machines", namespace: "capi", name: "m"},
}

func chartSchedulerAccess(ns, leaseNS string) (allowed, denied []rbacAccess) {
	allowed = []rbacAccess{
		// Through system:kube-scheduler and system:volume-scheduler.
		{verb: "list", resource: "nodes"},
		{verb: "watch", resource: "pods"},
		{verb: "create", resource: "pods", subresource: "binding", namespace: "team-a", name: "p"},
		{verb: "patch", resource: "pods", subresource: "status", namespace: "team-a", name: "p"},
		{verb: "delete", resource: "pods", namespace: "team-a", name: "victim"},
		{verb: "list", group: "policy", resource: "poddisruptionbudgets"},
		{verb: "update", resource: "persistentvolumes", name: "pv"},
		{verb: "list", group: "storage.k8s.io", resource: "storageclasses"},
		{verb: "list", group: "resource.k8s.io", resource: "resourceslices"},
		{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
		{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
		{verb: "get", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication"},
		// The plugin.
		{verb: "list", group: "scheduling.sigs.k8s.io", resource: "elasticquotatrees"},
		{verb: "watch", group: "scheduling.sigs.k8s.io", resource: "elasticquotatrees"},
		{verb: "update", group: "scheduling.sigs.k8s.io", resource: "elasticquotatrees", subresource: "status", namespace: "kube-system", name: "t"},
		{verb: "list", group: "kueue.x-k8s.io", resource: "resourceflavors"},
		{verb: "watch", group: "kueue.x-k8s.io", resource: "resourceflavors"},
		// The webhook looks up a flavor its informer has not seen yet.
		{verb: "get", group: "kueue.x-k8s.io", resource: "resourceflavors", name: "spot"},
		{verb: "create", group: "events.k8s.io", resource: "events", namespace: "kube-system"},
		{verb: "patch", group: "events.k8s.io", resource: "events", namespace: "team-a"},
		// The leader Lease, which also decides the replica writing tree status.
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: leaseNS},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: leaseNS, name: "quotascale-scheduler"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: leaseNS, name: "quotascale-scheduler"},
	}
	denied = []rbacAccess{
		{verb: "get", resource: "secrets", namespace: ns, name: "x"},
		{verb: "delete", resource: "nodes", name: "n1"},
		{verb: "update", group: "scheduling.sigs.k8s.io", resource: "elasticquotatrees", namespace: "kube-system", name: "t"},
		{verb: "update", group: "autoscaling.x-k8s.io", resource: "capacityquotas", subresource: "status", name: "q"},
		{verb: "update", resource: "configmaps", namespace: ns, name: "cluster-autoscaler-status"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "cluster-autoscaler"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
	}
	return allowed, denied
}

// checkNoRBACWildcards: no rule of the chart's own roles has "*" anywhere, and
// every binding refers to one of the chart's roles or to a built-in role named
// here.
func checkChartNoRBACWildcards(t *testing.T, r *chartRendering) {
	t.Helper()
	ownRoles := map[string]bool{}
	for _, o := range r.objects {
		var rules []rbacv1.PolicyRule
		switch o.GetKind() {
		case "ClusterRole":
			c := chartFromUnstructured[rbacv1.ClusterRole](t, o)
			if c.AggregationRule != nil {
				t.Errorf("%s: aggregation rules are not expected", chartObjectKey(o))
			}
			rules = c.Rules
		case "Role":
			rules = chartFromUnstructured[rbacv1.Role](t, o).Rules
		default:
			continue
		}
		ownRoles[o.GetKind()+"/"+o.GetName()] = true
		if len(rules) == 0 {
			t.Errorf("%s has no rules", chartObjectKey(o))
		}
		for i, rule := range rules {
			for field, list := range map[string][]string{
				"verbs": rule.Verbs, "apiGroups": rule.APIGroups, "resources": rule.Resources,
				"resourceNames": rule.ResourceNames, "nonResourceURLs": rule.NonResourceURLs,
			} {
				for _, v := range list {
					if strings.Contains(v, "*") {
						t.Errorf("%s rule %d: %s has the wildcard %q", chartObjectKey(o), i, field, v)
					}
				}
			}
			// A rule is either for resources of groups or for non-resource
			// URLs, never both: a ClusterRole mixing them is hard to review.
			forResources := len(rule.Resources) > 0 && len(rule.APIGroups) > 0 && len(rule.NonResourceURLs) == 0
			forURLs := len(rule.NonResourceURLs) > 0 && len(rule.Resources) == 0 && len(rule.APIGroups) == 0
			if len(rule.Verbs) == 0 || !(forResources || forURLs) {
				t.Errorf("%s rule %d names no verb, or neither resources with their groups nor non-resource URLs alone: %+v", chartObjectKey(o), i, rule)
			}
		}
	}
	builtIn := map[string]bool{
		"ClusterRole/system:kube-scheduler":              true,
		"ClusterRole/system:volume-scheduler":            true,
		"Role/extension-apiserver-authentication-reader": true,
	}
	for _, o := range r.objects {
		var ref rbacv1.RoleRef
		switch o.GetKind() {
		case "ClusterRoleBinding":
			ref = chartFromUnstructured[rbacv1.ClusterRoleBinding](t, o).RoleRef
		case "RoleBinding":
			ref = chartFromUnstructured[rbacv1.RoleBinding](t, o).RoleRef
		default:
			continue
		}
		key := ref.Kind + "/" + ref.Name
		if !ownRoles[key] && !builtIn[key] {
			t.Errorf("%s binds %s, which is neither the chart's nor an allowed built-in role", chartObjectKey(o), key)
		}
	}
}

// checkRBACGrants evaluates every request of wantAllowed and wantDenied with
// the API server's RBAC authorizer over the rendered roles and bindings plus
// the built-in roles the chart binds, from the API server's bootstrap policy.
// (Rendering alone, without installing the chart's roles in localcluster.)
func checkChartRBACGrants(t *testing.T, ctx context.Context, r *chartRendering, ns string, want chartWant) {
	t.Helper()
	s := &chartRBAC{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	for _, o := range r.objects {
		switch o.GetKind() {
		case "Role":
			role := chartFromUnstructured[rbacv1.Role](t, o)
			s.roles[role.Namespace+"/"+role.Name] = role
		case "ClusterRole":
			role := chartFromUnstructured[rbacv1.ClusterRole](t, o)
			s.clusterRoles[role.Name] = role
		case "RoleBinding":
			s.roleBindings = append(s.roleBindings, chartFromUnstructured[rbacv1.RoleBinding](t, o))
		case "ClusterRoleBinding":
			s.clusterRoleBindings = append(s.clusterRoleBindings, chartFromUnstructured[rbacv1.ClusterRoleBinding](t, o))
		}
	}
	// The built-in roles as a real API server of this Kubernetes version
	// installs them, with the same feature gates, from its bootstrap policy.
	for _, role := range bootstrappolicy.ClusterRoles() {
		if role.Name == "system:kube-scheduler" || role.Name == "system:volume-scheduler" {
			s.clusterRoles[role.Name] = &role
		}
	}
	for _, role := range bootstrappolicy.NamespaceRoles()["kube-system"] {
		if role.Name == "extension-apiserver-authentication-reader" {
			role.Namespace = "kube-system"
			s.roles["kube-system/"+role.Name] = &role
		}
	}
	if len(s.clusterRoles) == 0 || s.roles["kube-system/extension-apiserver-authentication-reader"] == nil {
		t.Fatal("the bootstrap policy lacks the built-in roles the chart binds")
	}
	authz := rbacauthorizer.New(s, s, s, s)

	check := func(sa string, allowed, denied []rbacAccess) {
		u := &user.DefaultInfo{Name: serviceaccount.MakeUsername(ns, sa), Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)}
		for _, list := range []struct {
			accesses []rbacAccess
			want     authorizer.Decision
		}{{allowed, authorizer.DecisionAllow}, {denied, authorizer.DecisionNoOpinion}} {
			for _, a := range list.accesses {
				attrs := authorizer.AttributesRecord{User: u, Verb: a.verb, APIGroup: a.group, APIVersion: "*", Resource: a.resource,
					Subresource: a.subresource, Namespace: a.namespace, Name: a.name, ResourceRequest: a.path == "", Path: a.path}
				got, reason, err := authz.Authorize(ctx, attrs)
				if err != nil {
					t.Errorf("%s: %s: %v", sa, a, err)
				}
				if got != list.want {
					verdict := map[authorizer.Decision]string{authorizer.DecisionAllow: "allowed", authorizer.DecisionNoOpinion: "denied", authorizer.DecisionDeny: "denied"}
					t.Errorf("ServiceAccount %s: %s: got %s, want %s (%s)", sa, a, verdict[got], verdict[list.want], reason)
				}
			}
		}
	}
	if want.autoscaler != nil {
		check("quotascale-cluster-autoscaler", want.autoscalerAllowed, want.autoscalerDenied)
	}
	if want.scheduler != nil {
		check("quotascale-scheduler", want.schedulerAllowed, want.schedulerDenied)
	}
	if r.find("ServiceAccount", "quotascale-scheduler-metrics-reader") != nil {
		if len(want.metricsReaderAllowed) == 0 {
			t.Error("the chart renders the metrics reader ServiceAccount but the case names none of its rights")
		}
		check("quotascale-scheduler-metrics-reader", want.metricsReaderAllowed, want.metricsReaderDenied)
	}
}

// chartMetricsReaderAccess: the token Prometheus scrapes the scheduler with
// may read /metrics and nothing else a leaked token could be used for.
func chartMetricsReaderAccess(ns string) (allowed, denied []rbacAccess) {
	allowed = []rbacAccess{{verb: "get", path: "/metrics"}}
	denied = []rbacAccess{
		{verb: "get", path: "/debug/pprof/profile"},
		{verb: "get", path: "/configz"},
		{verb: "get", resource: "secrets", namespace: ns},
		{verb: "list", resource: "pods"},
		{verb: "get", resource: "nodes", subresource: "proxy", name: "n1"},
	}
	return allowed, denied
}

// chartRBAC serves the RBAC authorizer from objects in memory.
type chartRBAC struct {
	roles               map[string]*rbacv1.Role
	clusterRoles        map[string]*rbacv1.ClusterRole
	roleBindings        []*rbacv1.RoleBinding
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

func (s *chartRBAC) GetRole(_ context.Context, namespace, name string) (*rbacv1.Role, error) {
	if r, ok := s.roles[namespace+"/"+name]; ok {
		return r, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("roles"), name)
}

func (s *chartRBAC) ListRoleBindings(_ context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range s.roleBindings {
		if b.Namespace == namespace {
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *chartRBAC) GetClusterRole(_ context.Context, name string) (*rbacv1.ClusterRole, error) {
	if r, ok := s.clusterRoles[name]; ok {
		return r, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("clusterroles"), name)
}

func (s *chartRBAC) ListClusterRoleBindings(context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return s.clusterRoleBindings, nil
}
