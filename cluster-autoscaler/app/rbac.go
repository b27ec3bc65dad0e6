package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/features"

	"github.com/quotascale/quotascale/cloudprovider/clusterapi"
	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// Access is one kind of API request the autoscaler makes.
type Access struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
}

func (a Access) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r += "." + a.Group
	}
	s := a.Verb + " " + r
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	}
	return s
}

func each(verbs []string, group string, resources ...string) []Access {
	var out []Access
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, Access{Verb: v, Group: group, Resource: r})
		}
	}
	return out
}

var watch = []string{"list", "watch"}

// RequiredAccess is every API request the autoscaler makes with opts, the
// scheduling simulation's informers included: what its ServiceAccount must be
// allowed. Upstream's chart's ClusterRole and Role grant all of it but the
// ElasticQuotaTree, ResourceFlavor and DeviceTaintRule reads (the CapacityQuota
// rules too before chart 9.59.0; for clusterapi, patching Machines and scaling
// MachineSets; for kwok, its state ConfigMap), which
// docs/migrating-from-upstream.md lists.
func RequiredAccess(opts config.Options) []Access {
	ns := opts.Namespace
	out := slices.Concat(
		each(watch, "", "nodes", "pods", "namespaces", "services", "replicationcontrollers", "persistentvolumes", "persistentvolumeclaims"),
		each(watch, "apps", "replicasets", "statefulsets"),
		each(watch, "policy", "poddisruptionbudgets"),
		each(watch, "storage.k8s.io", "storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"),
		each(watch, "resource.k8s.io", "resourceclaims", "resourceslices", "deviceclasses"),
		[]Access{
			{Verb: "get", Resource: "nodes"}, {Verb: "update", Resource: "nodes"},
			{Verb: "get", Resource: "pods"}, {Verb: "create", Resource: "pods", Subresource: "eviction"},
			{Verb: "create", Resource: "events"}, {Verb: "patch", Resource: "events"},
			// The priority expander's ConfigMap.
			{Verb: "list", Resource: "configmaps", Namespace: ns}, {Verb: "watch", Resource: "configmaps", Namespace: ns},
		},
		each(watch, "autoscaling.x-k8s.io", "capacityquotas"),
		[]Access{{Verb: "update", Group: "autoscaling.x-k8s.io", Resource: "capacityquotas", Subresource: "status"}},
	)
	// The simulation's DRA plugin watches DeviceTaintRules only with the gate on.
	if feature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules) {
		out = append(out, each(watch, "resource.k8s.io", "devicetaintrules")...)
	}
	if opts.WriteStatusConfigMap {
		out = append(out,
			Access{Verb: "create", Resource: "configmaps", Namespace: ns},
			Access{Verb: "get", Resource: "configmaps", Namespace: ns, Name: opts.StatusConfigMapName},
			Access{Verb: "update", Resource: "configmaps", Namespace: ns, Name: opts.StatusConfigMapName})
	}
	if opts.LeaderElect {
		out = append(out,
			Access{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns},
			Access{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: opts.LeaderElectResourceName},
			Access{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: opts.LeaderElectResourceName})
	}
	if opts.ElasticQuotaEnabled {
		out = append(out, each(watch, "scheduling.sigs.k8s.io", "elasticquotatrees")...)
		out = append(out, each(watch, "kueue.x-k8s.io", "resourceflavors")...)
	}
	switch opts.CloudProviderName {
	case clusterapi.ProviderName:
		out = append(out, each([]string{"get", "list", "watch"}, "cluster.x-k8s.io", "machinedeployments", "machinesets", "machines")...)
		out = append(out, Access{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines"})
		for _, r := range []string{"machinedeployments", "machinesets"} {
			out = append(out,
				Access{Verb: "get", Group: "cluster.x-k8s.io", Resource: r, Subresource: "scale"},
				Access{Verb: "update", Group: "cluster.x-k8s.io", Resource: r, Subresource: "scale"})
		}
	case kwok.ProviderName:
		stateNS, stateName, _ := strings.Cut(opts.KwokState, "/")
		out = append(out,
			Access{Verb: "get", Resource: "configmaps", Namespace: stateNS, Name: stateName},
			Access{Verb: "update", Resource: "configmaps", Namespace: stateNS, Name: stateName},
			Access{Verb: "create", Resource: "configmaps", Namespace: stateNS})
		if ref, ok := strings.CutPrefix(opts.CloudConfig, "configmap:"); ok {
			cfgNS, cfgName, _ := strings.Cut(ref, "/")
			cfgName, _, _ = strings.Cut(cfgName, "/")
			out = append(out, Access{Verb: "get", Resource: "configmaps", Namespace: cfgNS, Name: cfgName})
		}
	}
	return out
}

// CheckAccess asks the API server, with one SelfSubjectAccessReview per
// request kind, whether the autoscaler may make every request it needs, and
// fails naming each one it may not: without that, an informer refused its
// list would wait forever while the process looked like a healthy standby.
func CheckAccess(ctx context.Context, client kubernetes.Interface, opts config.Options) error {
	var denied []string
	for _, a := range RequiredAccess(opts) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
			},
		}}
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("checking whether the autoscaler may %s: %w", a, err)
		}
		if !got.Status.Allowed {
			denied = append(denied, a.String())
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("the autoscaler's credentials may not %s: add these rules to its ClusterRole or Role (docs/migrating-from-upstream.md, RBAC)",
			strings.Join(denied, "; "))
	}
	return nil
}
