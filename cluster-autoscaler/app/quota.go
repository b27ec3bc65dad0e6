package app

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/pkg/typedinformer"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/processors/capacityquota"
	"github.com/quotascale/quotascale/processors/elasticquota"
)

// quotas are the processors that hold scale-up to the CapacityQuotas and the
// ElasticQuotaTree, and the informers they read.
type quotas struct {
	capacity *capacityquota.Processor
	// trees is nil with --elastic-quota-enabled=false.
	trees     *elasticquota.Processor
	informers []cache.SharedIndexInformer
}

func newQuotas(opts config.Options, c *clients, recorder record.EventRecorder, metrics *capacityquota.Metrics) (*quotas, error) {
	quotaInformer := typedinformer.New[autoscalingv1beta1.CapacityQuota](c.dynamic, capacityquota.Resource, 0)
	capacity, err := capacityquota.New(capacityquota.Options{
		Enabled:     opts.CapacityQuotasEnabled,
		ClusterWide: clusterWideLimits(opts),
	}, capacityquota.ListerFrom(quotaInformer.GetStore()), c.factory.Core().V1().Nodes().Informer(), recorder, metrics)
	if err != nil {
		return nil, err
	}
	// The simulation reads the same ResourceSlice informer; DeviceClasses
	// decide which of a node's devices each class counts.
	resource := c.factory.Resource().V1()
	if err := capacity.WatchDevices(resource.ResourceSlices().Informer(), resource.DeviceClasses().Informer()); err != nil {
		return nil, err
	}
	q := &quotas{capacity: capacity, informers: []cache.SharedIndexInformer{quotaInformer}}
	if opts.ElasticQuotaEnabled {
		treeInformer := typedinformer.New[schedulingv1beta1.ElasticQuotaTree](c.dynamic, elasticquota.Resource, 0)
		q.trees = elasticquota.New(treeInformer.GetStore(), c.factory.Core().V1().Pods().Lister(), opts.ElasticQuotaSchedulerNames).
			WithClaims(c.factory.Resource().V1().ResourceClaims().Lister(), c.factory.Resource().V1().DeviceClasses().Lister())
		q.informers = append(q.informers, treeInformer)
	}
	return q, nil
}

// podListProcessors drop the pending pods no quota will admit.
func (q *quotas) podListProcessors() []processors.PodListProcessor {
	if q.trees == nil {
		return nil
	}
	return []processors.PodListProcessor{q.trees}
}

// rootMin is the tree root's min in force, which scale-down keeps allocatable
// for; nil without a tree.
func (q *quotas) rootMin() func() corev1.ResourceList {
	if q.trees == nil {
		return nil
	}
	return q.trees.RootMin
}

// clusterWideLimits are --cores-total, --memory-total and --max-nodes-total as
// the limits of the "cluster-wide" quota.
func clusterWideLimits(opts config.Options) autoscalingv1beta1.ResourceList {
	limits := autoscalingv1beta1.ResourceList{
		autoscalingv1beta1.ResourceCPU:    *resource.NewQuantity(opts.MaxCoresTotal, resource.DecimalSI),
		autoscalingv1beta1.ResourceMemory: *resource.NewQuantity(opts.MaxMemoryTotal, resource.BinarySI),
	}
	if opts.MaxNodesTotal > 0 {
		limits[autoscalingv1beta1.ResourceNodes] = *resource.NewQuantity(int64(opts.MaxNodesTotal), resource.DecimalSI)
	}
	return limits
}
