package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
)

// startControllers runs the kube-controller-manager loops the scenarios depend on:
// deployments create replica sets, replica sets create (and recreate) pods,
// deleting a namespace deletes what is in it, so tests can clean up after
// themselves, and the disruption controller keeps PodDisruptionBudgets' status,
// which the Eviction API and the autoscaler's scale-down read. DaemonSets run
// their pods on the nodes they pick, so node templates, utilization and
// scale-down meet DaemonSet pods as on a real cluster.
func startControllers(ctx context.Context, config *restclient.Config) error {
	config = restclient.AddUserAgent(restclient.CopyConfig(config), "localcluster-controllers")
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("controller client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	dc, err := deployment.NewDeploymentController(ctx,
		factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client)
	if err != nil {
		return fmt.Errorf("deployment controller: %w", err)
	}
	rsc := replicaset.NewReplicaSetController(ctx,
		factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, replicaset.BurstReplicas)
	metadataClient, err := metadata.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	nsc := namespace.NewNamespaceController(ctx, client, metadataClient,
		client.Discovery().ServerPreferredNamespacedResources,
		factory.Core().V1().Namespaces(), 5*time.Minute, corev1.FinalizerKubernetes)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	scaleClient, err := scale.NewForConfig(config, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(client.Discovery()))
	if err != nil {
		return fmt.Errorf("scale client: %w", err)
	}
	disruptionCtrl := disruption.NewDisruptionController(ctx, factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(), factory.Apps().V1().Deployments(),
		factory.Apps().V1().StatefulSets(), client, mapper, scaleClient, client.Discovery())
	dsc, err := daemon.NewDaemonSetsController(ctx, factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), client, flowcontrol.NewBackOff(time.Second, 15*time.Minute))
	if err != nil {
		return fmt.Errorf("daemonset controller: %w", err)
	}
	factory.Start(ctx.Done())
	go dsc.Run(ctx, 2)
	go disruptionCtrl.Run(ctx, 2)
	go dc.Run(ctx, 2)
	go rsc.Run(ctx, 2)
	go nsc.Run(ctx, 2)
	return nil
}
