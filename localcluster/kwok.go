package localcluster

import (
	"context"
	"fmt"
	"io"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	kwokclient "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	utilsclient "sigs.k8s.io/kwok/pkg/utils/client"
)

// KwokNodeAnnotation marks the nodes kwok plays the kubelet for. Only annotated
// nodes are managed, so a test can still create nodes that never turn Ready.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// startKwok runs kwok's controllers in-process with its "fast" stages: annotated
// nodes turn Ready at once, bound pods turn Running, deleted pods go away.
func startKwok(ctx context.Context, kubeconfigPath string, logs io.Writer) error {
	clientset, err := utilsclient.NewClientset("", kubeconfigPath)
	if err != nil {
		return fmt.Errorf("kwok clientset: %w", err)
	}
	restConfig, err := clientset.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("kwok rest config: %w", err)
	}
	dynamicClient, err := clientset.ToDynamicClient()
	if err != nil {
		return fmt.Errorf("kwok dynamic client: %w", err)
	}
	restMapper, err := clientset.ToRESTMapper()
	if err != nil {
		return fmt.Errorf("kwok rest mapper: %w", err)
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return fmt.Errorf("kwok rest client: %w", err)
	}
	typedClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kwok typed client: %w", err)
	}
	kwokTyped, err := kwokclient.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kwok client: %w", err)
	}
	stages, err := fastStages()
	if err != nil {
		return err
	}
	ctrl, err := controllers.NewController(controllers.Config{
		Clock:                             clock.RealClock{},
		DynamicClient:                     dynamicClient,
		RESTClient:                        restClient,
		RESTMapper:                        restMapper,
		ImpersonatingDynamicClient:        clientset.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:          clientset.ToImpersonatingTypedClient(),
		TypedClient:                       typedClient,
		TypedKwokClient:                   kwokTyped,
		ManageNodesWithAnnotationSelector: KwokNodeAnnotation + "=fake",
		CIDR:                              "10.244.0.0/16",
		NodeIP:                            "10.0.0.1",
		LocalStages:                       stages,
		PodPlayStageParallelism:           8,
		NodePlayStageParallelism:          4,
		PodsOnNodeSyncParallelism:         4,
		ID:                                "localcluster",
	})
	if err != nil {
		return fmt.Errorf("creating kwok controller: %w", err)
	}
	ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(logs, kwoklog.LevelWarn))
	if err := ctrl.Start(ctx); err != nil {
		return fmt.Errorf("starting kwok controller: %w", err)
	}
	return nil
}

func fastStages() (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	parse := func(docs ...string) ([]*internalversion.Stage, error) {
		out := make([]*internalversion.Stage, 0, len(docs))
		for _, d := range docs {
			s, err := config.UnmarshalWithType[*internalversion.Stage](d)
			if err != nil {
				return nil, fmt.Errorf("parsing kwok stage: %w", err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	nodeStages, err := parse(nodefast.DefaultNodeInit)
	if err != nil {
		return nil, err
	}
	podStages, err := parse(podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete)
	if err != nil {
		return nil, err
	}
	return map[internalversion.StageResourceRef][]*internalversion.Stage{
		{APIGroup: "v1", Kind: "Node"}: nodeStages,
		{APIGroup: "v1", Kind: "Pod"}:  podStages,
	}, nil
}
