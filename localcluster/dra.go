package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
)

// startDRA runs what Dynamic Resource Allocation needs besides the API server
// and the scheduler (whose DynamicResources plugin is on by default in 1.37):
// kube-controller-manager's resource claim controller, which creates the
// claims of pods' ResourceClaimTemplates and releases claims of finished pods,
// and a kwok DRA driver, which publishes each kwok node's devices.
func startDRA(ctx context.Context, config *restclient.Config) error {
	config = restclient.AddUserAgent(restclient.CopyConfig(config), "localcluster-dra")
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("DRA client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	claims, err := resourceclaim.NewController(klog.FromContext(ctx).WithName("resource-claim-controller"), client,
		factory.Core().V1().Pods(), factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		return fmt.Errorf("resource claim controller: %w", err)
	}
	driverFactory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = "app.kubernetes.io/managed-by=" + kwok.DriverManagedBy
		}))
	driver, err := newKwokDRADriver(client, factory.Core().V1().Nodes().Informer(), factory.Core().V1().Nodes().Lister(),
		driverFactory.Resource().V1().ResourceSlices().Informer())
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	driverFactory.Start(ctx.Done())
	go claims.Run(ctx, 2)
	go driver.run(ctx)
	return nil
}

// kwokDRADriver plays, for every kwok node, the DRA driver that would run on
// it: it publishes the ResourceSlices of the devices the node's
// kwok.DevicesAnnotation declares (kwok.NodeResourceSlices), keeps them as
// declared, and removes them when the node no longer declares them. A slice
// is owned by its node, so the garbage collector removes it with the node.
type kwokDRADriver struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	synced []cache.InformerSynced
	// slices are the driver's own, indexed by node name.
	slices cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
}

const sliceNodeIndex = "nodeName"

func newKwokDRADriver(client kubernetes.Interface, nodeInformer cache.SharedIndexInformer, nodes corelisters.NodeLister,
	sliceInformer cache.SharedIndexInformer) (*kwokDRADriver, error) {
	d := &kwokDRADriver{
		client: client, nodes: nodes, slices: sliceInformer.GetIndexer(),
		synced: []cache.InformerSynced{nodeInformer.HasSynced, sliceInformer.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kwok-dra-driver"}),
	}
	if err := sliceInformer.AddIndexers(cache.Indexers{sliceNodeIndex: func(obj any) ([]string, error) {
		if s, ok := obj.(*resourcev1.ResourceSlice); ok && s.Spec.NodeName != nil {
			return []string{*s.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("indexing resource slices: %w", err)
	}
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		switch o := obj.(type) {
		case *corev1.Node:
			d.queue.Add(o.Name)
		case *resourcev1.ResourceSlice:
			if o.Spec.NodeName != nil {
				d.queue.Add(*o.Spec.NodeName)
			}
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
	if _, err := nodeInformer.AddEventHandler(handler); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	if _, err := sliceInformer.AddEventHandler(handler); err != nil {
		return nil, fmt.Errorf("watching resource slices: %w", err)
	}
	return d, nil
}

func (d *kwokDRADriver) run(ctx context.Context) {
	defer d.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for d.next(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
}

func (d *kwokDRADriver) next(ctx context.Context) bool {
	name, shutdown := d.queue.Get()
	if shutdown {
		return false
	}
	defer d.queue.Done(name)
	if err := d.sync(ctx, name); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "kwok DRA driver: publishing a node's devices failed", "node", name)
		}
		d.queue.AddRateLimited(name)
		return true
	}
	d.queue.Forget(name)
	return true
}

// sync makes the driver's slices of node name what the node declares: none
// for a node that is gone (its slices are the garbage collector's), being
// deleted, or declaring no devices.
func (d *kwokDRADriver) sync(ctx context.Context, name string) error {
	node, err := d.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	var want []*resourcev1.ResourceSlice
	if node.DeletionTimestamp == nil {
		if want, err = kwok.NodeResourceSlices(node); err != nil {
			// A node whose declaration is wrong publishes nothing, as a driver
			// that finds no usable device; retrying would not change it.
			klog.FromContext(ctx).Error(err, "kwok DRA driver: ignoring the node's devices", "node", name)
			want = nil
		}
	}
	objs, err := d.slices.ByIndex(sliceNodeIndex, name)
	if err != nil {
		return fmt.Errorf("listing the slices of node %s: %w", name, err)
	}
	have := map[string]*resourcev1.ResourceSlice{}
	for _, obj := range objs {
		s := obj.(*resourcev1.ResourceSlice)
		have[s.Name] = s
	}
	for _, s := range want {
		if err := d.publish(ctx, s, have[s.Name]); err != nil {
			return err
		}
		delete(have, s.Name)
	}
	for _, s := range have {
		err := d.client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting resource slice %s of node %s: %w", s.Name, name, err)
		}
	}
	return nil
}

// publish creates want, or updates old to it with the pool's next generation
// when what it describes changed.
func (d *kwokDRADriver) publish(ctx context.Context, want, old *resourcev1.ResourceSlice) error {
	if old == nil {
		_, err := d.client.ResourceV1().ResourceSlices().Create(ctx, want, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating resource slice %s: %w", want.Name, err)
		}
		return nil
	}
	want.Spec.Pool.Generation = old.Spec.Pool.Generation
	if equality.Semantic.DeepEqual(want.Spec, old.Spec) && equality.Semantic.DeepEqual(want.OwnerReferences, old.OwnerReferences) {
		return nil
	}
	updated := old.DeepCopy()
	updated.Spec, updated.OwnerReferences = want.Spec, want.OwnerReferences
	updated.Spec.Pool.Generation++
	if _, err := d.client.ResourceV1().ResourceSlices().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating resource slice %s: %w", want.Name, err)
	}
	return nil
}
