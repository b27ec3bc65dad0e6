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
	restclient "k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/features"

	"github.com/quotascale/quotascale/cloudprovider/builder"
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
// scheduling simulation's informers included: what its credentials must be
// allowed, to the cluster it scales (workload) and, with clusterapi, to the
// Cluster API management cluster (the workload cluster too unless
// --cloud-config or --clusterapi-cloud-config-authoritative says otherwise).
// Upstream's chart's ClusterRole and Role grant all of it but the
// ElasticQuotaTree, ResourceFlavor, PodGroup and DeviceTaintRule reads (the CapacityQuota
// rules too before chart 9.59.0; for clusterapi, patching Machines and scaling
// MachineSets; for kwok, its state ConfigMap), which
// docs/migrating-from-upstream.md lists.
func RequiredAccess(opts config.Options) (workload, management []Access) {
	ns := opts.Namespace
	workload = slices.Concat(
		each(watch, "", "nodes", "pods", "namespaces", "services", "replicationcontrollers", "persistentvolumes", "persistentvolumeclaims"),
		each(watch, "apps", "daemonsets", "replicasets", "statefulsets"),
		each(watch, "policy", "poddisruptionbudgets"),
		// The Workload API's PodGroups size gangs; watched only where served.
		each(watch, "scheduling.k8s.io", "podgroups"),
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
		workload = append(workload, each(watch, "resource.k8s.io", "devicetaintrules")...)
	}
	if opts.WriteStatusConfigMap {
		workload = append(workload,
			Access{Verb: "create", Resource: "configmaps", Namespace: ns},
			Access{Verb: "get", Resource: "configmaps", Namespace: ns, Name: opts.StatusConfigMapName},
			Access{Verb: "update", Resource: "configmaps", Namespace: ns, Name: opts.StatusConfigMapName})
	}
	if opts.LeaderElect {
		workload = append(workload,
			Access{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns},
			Access{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: opts.LeaderElectResourceName},
			Access{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: opts.LeaderElectResourceName})
	}
	if opts.ElasticQuotaEnabled {
		workload = append(workload, each(watch, "scheduling.sigs.k8s.io", "elasticquotatrees")...)
		workload = append(workload, each(watch, "kueue.x-k8s.io", "resourceflavors")...)
	}
	switch opts.CloudProviderName {
	case clusterapi.ProviderName:
		// Infrastructure machine templates are read too, but their kinds are
		// known only from the node groups; a kind that cannot be read is
		// backed off by the provider, and annotated groups do without it.
		management = each([]string{"get", "list", "watch"}, "cluster.x-k8s.io", "machinedeployments", "machinesets", "machinepools", "machines")
		management = append(management, Access{Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines"})
		for _, r := range []string{"machinedeployments", "machinesets", "machinepools"} {
			management = append(management,
				Access{Verb: "get", Group: "cluster.x-k8s.io", Resource: r, Subresource: "scale"},
				Access{Verb: "update", Group: "cluster.x-k8s.io", Resource: r, Subresource: "scale"})
		}
	case kwok.ProviderName:
		stateNS, stateName, _ := strings.Cut(opts.KwokState, "/")
		workload = append(workload,
			Access{Verb: "get", Resource: "configmaps", Namespace: stateNS, Name: stateName},
			Access{Verb: "update", Resource: "configmaps", Namespace: stateNS, Name: stateName},
			Access{Verb: "create", Resource: "configmaps", Namespace: stateNS})
		if ref, ok := strings.CutPrefix(opts.CloudConfig, "configmap:"); ok {
			cfgNS, cfgName, _ := strings.Cut(ref, "/")
			cfgName, _, _ = strings.Cut(cfgName, "/")
			workload = append(workload, Access{Verb: "get", Resource: "configmaps", Namespace: cfgNS, Name: cfgName})
		}
	}
	return workload, management
}

// CheckAccess asks the API servers, with one SelfSubjectAccessReview per
// request kind, whether the autoscaler may make every request it needs, and
// fails naming each one it may not: without that, an informer refused its
// list would wait forever while the process looked like a healthy standby.
// workload is the config of the cluster the autoscaler scales.
func CheckAccess(ctx context.Context, workload *restclient.Config, opts config.Options) error {
	workloadAccess, managementAccess := RequiredAccess(opts)
	denied, err := deniedAccess(ctx, workload, workloadAccess)
	if err != nil {
		return err
	}
	if len(managementAccess) > 0 {
		management, err := builder.ManagementConfig(opts, builder.Cluster{Config: workload, UserAgent: Component})
		if err != nil {
			return err
		}
		more, err := deniedAccess(ctx, management, managementAccess)
		if err != nil {
			return err
		}
		if management != workload {
			for i := range more {
				more[i] += " in the Cluster API management cluster"
			}
		}
		denied = append(denied, more...)
	}
	if len(denied) > 0 {
		return fmt.Errorf("the autoscaler's credentials may not %s: add these rules to its ClusterRole or Role (docs/migrating-from-upstream.md, RBAC)",
			strings.Join(denied, "; "))
	}
	return nil
}

// deniedAccess is the accesses the credentials of cfg may not make.
func deniedAccess(ctx context.Context, cfg *restclient.Config, accesses []Access) ([]string, error) {
	// One burst of reviews at start: not throttled like the autoscaler's own
	// requests (--kube-client-qps).
	cfg = restclient.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	var denied []string
	for _, a := range accesses {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
			},
		}}
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("checking whether the autoscaler may %s: %w", a, err)
		}
		if !got.Status.Allowed {
			denied = append(denied, a.String())
		}
	}
	return denied, nil
}
