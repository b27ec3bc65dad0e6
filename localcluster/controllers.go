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
	"k8s.io/client-go/metadata/metadatainformer"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
)

// startControllers runs the kube-controller-manager loops the scenarios depend on:
// deployments create replica sets, replica sets create (and recreate) pods,
// deleting a namespace deletes what is in it, so tests can clean up after
// themselves, the garbage collector deletes what a deleted object owned (the
// replica sets and pods of a deleted deployment, say, which would otherwise
// hold their nodes forever), and the disruption controller keeps
// PodDisruptionBudgets' status,
// which the Eviction API and the autoscaler's scale-down read. DaemonSets run
// their pods on the nodes they pick, so node templates, utilization and
// scale-down meet DaemonSet pods as on a real cluster. PodGroupProtection
// releases the PodGroups of the Workload API (workload.go).
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
	runPodGroupProtection, err := newPodGroupProtection(ctx, factory, client)
	if err != nil {
		return err
	}
	metadataFactory := metadatainformer.NewSharedInformerFactory(metadataClient, 10*time.Minute)
	informersStarted := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, mapper,
		garbagecollector.DefaultIgnoredResources(), informerfactory.NewInformerFactory(factory, metadataFactory), informersStarted)
	if err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	factory.Start(ctx.Done())
	metadataFactory.Start(ctx.Done())
	close(informersStarted)
	// As kube-controller-manager's: the collector re-reads discovery on the
	// same period, so it follows the CRDs installed after it starts.
	const gcSyncPeriod = 30 * time.Second
	go gc.Run(ctx, 2, gcSyncPeriod)
	go gc.Sync(ctx, client.Discovery(), gcSyncPeriod)
	go dsc.Run(ctx, 2)
	go disruptionCtrl.Run(ctx, 2)
	go dc.Run(ctx, 2)
	go rsc.Run(ctx, 2)
	go nsc.Run(ctx, 2)
	go runPodGroupProtection(ctx)
	return nil
}
