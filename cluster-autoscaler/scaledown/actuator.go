package scaledown

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
	"github.com/quotascale/quotascale/pkg/nodetemplate"
	"github.com/quotascale/quotascale/processors"
)

// Actuator removes the nodes a plan chose.
type Actuator struct {
	Client   kubernetes.Interface
	Provider cloudprovider.CloudProvider
	// MaxGracefulTermination bounds how long a drain waits for pods to go.
	MaxGracefulTermination time.Duration
	// DrainPriority, when set, drains pods by priority group, lowest first,
	// each group with its own grace period (upstream's
	// --drain-priority-config); otherwise all pods go at once with
	// MaxGracefulTermination.
	DrainPriority []config.DrainPriority
	// CordonNode marks the node unschedulable along with the taint.
	CordonNode bool
	// MaxPodEvictionTime is how long an eviction is retried (a
	// PodDisruptionBudget may refuse it for a while).
	MaxPodEvictionTime time.Duration
	// EvictionRetryInterval is the wait between eviction attempts.
	EvictionRetryInterval time.Duration
	// DeleteDelayAfterTaint is the wait between tainting a node and draining
	// it, so that the scheduler sees the taint; with DynamicDeleteDelay it is
	// twice the slowest taint update of the last hour instead.
	DeleteDelayAfterTaint time.Duration
	DynamicDeleteDelay    bool
	// Evicted counts evictions by result (upstream's evicted_pods_total).
	Evicted func(result string, pods int)
	// BatchInterval gathers drained nodes for that long and deletes each
	// group's together (RemoveAll).
	BatchInterval time.Duration

	// DelayDeletionTimeout bounds the wait for the node's delay-deletion
	// annotations to go before its instance is deleted; 0 waits not at all.
	DelayDeletionTimeout time.Duration
	// EvictDaemonSetPodsFromEmpty and EvictDaemonSetPodsFromOccupied say
	// whether a node's DaemonSet pods are evicted before it goes, when it had
	// no pods to move and when it had some; a pod's EnableDSEvictionAnnotation
	// overrides either.
	EvictDaemonSetPodsFromEmpty, EvictDaemonSetPodsFromOccupied bool

	latencies []taintLatency
}

type taintLatency struct {
	at      time.Time
	latency time.Duration
}

// DelayDeletionAnnotationPrefix: while a node has an annotation with this
// prefix, another component still needs it, and its deletion waits (up to
// --node-deletion-delay-timeout), as upstream's.
const DelayDeletionAnnotationPrefix = "delay-deletion.cluster-autoscaler.kubernetes.io/"

// EnableDSEvictionAnnotation on a DaemonSet pod, "true" or "false", decides
// whether that pod is evicted before its node goes, whatever the flags say.
const EnableDSEvictionAnnotation = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"

// delayDeletionPoll is how often the node is read again while its
// delay-deletion annotations are awaited.
const delayDeletionPoll = time.Second

// Remove taints the node so nothing new lands on it, evicts its pods through the
// Eviction API (so PodDisruptionBudgets are honoured), waits for them to go and
// deletes the node's instance. When the drain fails the taint is rolled back and
// the node stays.
func (a *Actuator) Remove(ctx context.Context, r processors.NodeRemoval) error {
	if err := a.prepare(ctx, r); err != nil {
		return err
	}
	return a.deleteNodes(ctx, []processors.NodeRemoval{r})[0]
}

// RemoveAll removes the nodes of one loop, each as Remove does, and returns
// an error per removal (nil when removed). With BatchInterval the drained
// nodes are gathered for that long and each group's deleted in one call, as
// upstream's --node-deletion-batcher-interval.
func (a *Actuator) RemoveAll(ctx context.Context, removals []processors.NodeRemoval) []error {
	if a.BatchInterval <= 0 {
		errs := make([]error, len(removals))
		for i, r := range removals {
			errs[i] = a.Remove(ctx, r)
		}
		return errs
	}
	errs := make([]error, len(removals))
	var ready []int
	batchStart := time.Now()
	for i, r := range removals {
		if errs[i] = a.prepare(ctx, r); errs[i] == nil {
			ready = append(ready, i)
		}
	}
	if len(ready) == 0 {
		return errs
	}
	if err := sleepCtx(ctx, a.BatchInterval-time.Since(batchStart)); err != nil {
		for _, i := range ready {
			errs[i] = err
		}
		return errs
	}
	byGroup := map[string][]int{}
	var groups []string
	for _, i := range ready {
		id := removals[i].GroupID
		if _, ok := byGroup[id]; !ok {
			groups = append(groups, id)
		}
		byGroup[id] = append(byGroup[id], i)
	}
	for _, id := range groups {
		batch := make([]processors.NodeRemoval, 0, len(byGroup[id]))
		for _, i := range byGroup[id] {
			batch = append(batch, removals[i])
		}
		for j, err := range a.deleteNodes(ctx, batch) {
			errs[byGroup[id][j]] = err
		}
	}
	return errs
}

// prepare taints the node so nothing new lands on it, waits for the taint to
// be seen and drains it; on a failure the taint is rolled back.
func (a *Actuator) prepare(ctx context.Context, r processors.NodeRemoval) error {
	tainted := time.Now()
	if err := a.setTaint(ctx, r.Node.Name, true); err != nil {
		return fmt.Errorf("tainting node %s: %w", r.Node.Name, err)
	}
	if err := a.waitAfterTaint(ctx, time.Since(tainted)); err != nil {
		a.rollback(ctx, r)
		return err
	}
	if err := a.drain(ctx, r.Node, r.Evicted); err != nil {
		a.rollback(ctx, r)
		return fmt.Errorf("draining node %s: %w", r.Node.Name, err)
	}
	a.evictDaemonSetPods(ctx, r.Node.Name, len(r.Evicted) == 0)
	a.waitForDelayDeletion(ctx, r.Node.Name)
	return nil
}

// deleteNodes deletes the drained nodes of one group in one call; when that
// fails every node's taint is rolled back.
func (a *Actuator) deleteNodes(ctx context.Context, removals []processors.NodeRemoval) []error {
	errs := make([]error, len(removals))
	fail := func(err error) []error {
		for i, r := range removals {
			a.rollback(ctx, r)
			errs[i] = err
		}
		return errs
	}
	group, err := a.Provider.NodeGroupForNode(removals[0].Node)
	if err != nil || group == nil {
		return fail(fmt.Errorf("node %s has no node group anymore: %v", removals[0].Node.Name, err))
	}
	nodes := make([]*corev1.Node, len(removals))
	for i, r := range removals {
		nodes[i] = r.Node
	}
	if err := group.DeleteNodes(nodes); err != nil {
		return fail(fmt.Errorf("deleting %d node(s) from node group %s: %w", len(nodes), removals[0].GroupID, err))
	}
	for _, r := range removals {
		klog.FromContext(ctx).Info("Removed node", "node", r.Node.Name, "nodeGroup", r.GroupID, "evictedPods", len(r.Evicted))
	}
	return errs
}

func (a *Actuator) rollback(ctx context.Context, r processors.NodeRemoval) {
	if err := a.setTaint(ctx, r.Node.Name, false); err != nil {
		klog.FromContext(ctx).Error(err, "Rolling back the ToBeDeleted taint", "node", r.Node.Name)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// waitAfterTaint waits --node-delete-delay-after-taint, or with
// --dynamic-node-delete-delay-after-taint-enabled twice the slowest taint
// update of the last hour (this one's took latency), as upstream.
func (a *Actuator) waitAfterTaint(ctx context.Context, latency time.Duration) error {
	delay := a.DeleteDelayAfterTaint
	if a.DynamicDeleteDelay {
		now := time.Now()
		kept := a.latencies[:0]
		for _, l := range a.latencies {
			if now.Sub(l.at) < time.Hour {
				kept = append(kept, l)
			}
		}
		a.latencies = append(kept, taintLatency{at: now, latency: latency})
		delay = 0
		for _, l := range a.latencies {
			delay = max(delay, 2*l.latency)
		}
	}
	return sleepCtx(ctx, delay)
}

// drain evicts the pods through the Eviction API, so that
// PodDisruptionBudgets are honoured, retrying each for --max-pod-eviction-time,
// and waits for them to be gone: all at once, or by priority group with
// --drain-priority-config, lowest priority first, as upstream.
func (a *Actuator) drain(ctx context.Context, node *corev1.Node, pods []*corev1.Pod) error {
	for _, g := range a.drainGroups(pods) {
		if err := a.evictAll(ctx, g.pods, g.grace); err != nil {
			return err
		}
		if err := a.waitGone(ctx, node, g.pods, g.grace); err != nil {
			return err
		}
	}
	return nil
}

type drainGroup struct {
	pods  []*corev1.Pod
	grace time.Duration
}

// drainGroups splits pods by --drain-priority-config, lowest priority group
// first: a pod belongs to the highest pair whose priority it reaches, or to
// the lowest pair when it reaches none.
func (a *Actuator) drainGroups(pods []*corev1.Pod) []drainGroup {
	if len(a.DrainPriority) == 0 {
		return []drainGroup{{pods: pods, grace: a.MaxGracefulTermination}}
	}
	pairs := slices.SortedFunc(slices.Values(a.DrainPriority), func(x, y config.DrainPriority) int { return cmp.Compare(x.Priority, y.Priority) })
	groups := make([]drainGroup, len(pairs))
	for i, p := range pairs {
		groups[i].grace = p.GracePeriod
	}
	for _, pod := range pods {
		priority := corev1helpers.PodPriority(pod)
		i := 0
		for j, p := range pairs {
			if priority >= p.Priority {
				i = j
			}
		}
		groups[i].pods = append(groups[i].pods, pod)
	}
	return groups
}

// evictionFor is pod's eviction with, as upstream, the pod's own grace
// period (30 s when unset), at most maxGrace.
func evictionFor(pod *corev1.Pod, maxGrace time.Duration) *policyv1.Eviction {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if limit := int64(maxGrace.Seconds()); limit > 0 && grace > limit {
		grace = limit
	}
	return &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace},
	}
}

func (a *Actuator) evictAll(ctx context.Context, pods []*corev1.Pod, maxGrace time.Duration) error {
	for _, pod := range pods {
		eviction := evictionFor(pod, maxGrace)
		var last error
		evict := func(ctx context.Context) (bool, error) {
			last = a.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, eviction)
			return last == nil || apierrors.IsNotFound(last), nil
		}
		// As upstream, one attempt is made whatever --max-pod-eviction-time
		// says; retries follow within it.
		var err error
		if done, _ := evict(ctx); !done {
			err = last
			if a.MaxPodEvictionTime > 0 {
				err = wait.PollUntilContextTimeout(ctx, a.EvictionRetryInterval, a.MaxPodEvictionTime, false, evict)
			}
		}
		if err != nil {
			a.countEvictions(metricsEvictionFailed, 1)
			if last == nil {
				last = err
			}
			return fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, last)
		}
		a.countEvictions(metricsEvictionSucceeded, 1)
	}
	return nil
}

// waitGone waits until the pods are gone from the node, not merely
// terminating, for their grace period and a headroom.
func (a *Actuator) waitGone(ctx context.Context, node *corev1.Node, pods []*corev1.Pod, grace time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, grace+podEvictionHeadroom, true, func(ctx context.Context) (bool, error) {
		for _, pod := range pods {
			got, err := a.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (got.UID != pod.UID || got.Spec.NodeName != node.Name)) {
				continue
			}
			if err != nil {
				return false, err
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for evicted pods to terminate: %w", err)
	}
	return nil
}

// podEvictionHeadroom is upstream's extra wait past a grace period.
const podEvictionHeadroom = 30 * time.Second

// Evicted pods' results, as evicted_pods_total's label values.
const (
	metricsEvictionSucceeded = "succeeded"
	metricsEvictionFailed    = "failed"
)

func (a *Actuator) countEvictions(result string, n int) {
	if a.Evicted != nil {
		a.Evicted(result, n)
	}
}

// evictDaemonSetPods evicts the node's DaemonSet pods that the flags (or
// their own annotation) send away. As upstream, this is best effort: a
// failed eviction is logged and keeps no node, and nobody waits for the pods
// to end, since the node goes with them anyway.
func (a *Actuator) evictDaemonSetPods(ctx context.Context, node string, empty bool) {
	byDefault := a.EvictDaemonSetPodsFromOccupied
	if empty {
		byDefault = a.EvictDaemonSetPodsFromEmpty
	}
	logger := klog.FromContext(ctx).WithValues("node", node)
	pods, err := a.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		logger.Error(err, "Listing the DaemonSet pods to evict")
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if ctrl := metav1.GetControllerOf(pod); ctrl == nil || ctrl.Kind != "DaemonSet" || pod.DeletionTimestamp != nil {
			continue
		}
		evict := byDefault
		switch pod.Annotations[EnableDSEvictionAnnotation] {
		case "true":
			evict = true
		case "false":
			evict = false
		}
		if !evict {
			continue
		}
		if err := a.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, evictionFor(pod, a.MaxGracefulTermination)); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "DaemonSet pod not evicted", "pod", klog.KObj(pod))
		}
	}
}

// waitForDelayDeletion waits, up to DelayDeletionTimeout, until the node has
// no delay-deletion annotation. As upstream, running out of time only warns:
// the node is deleted anyway.
func (a *Actuator) waitForDelayDeletion(ctx context.Context, name string) {
	if a.DelayDeletionTimeout == 0 {
		return
	}
	logger := klog.FromContext(ctx).WithValues("node", name)
	err := wait.PollUntilContextTimeout(ctx, delayDeletionPoll, a.DelayDeletionTimeout, true, func(ctx context.Context) (bool, error) {
		node, err := a.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading node %s: %w", name, err)
		}
		for key := range node.Annotations {
			if strings.HasPrefix(key, DelayDeletionAnnotationPrefix) {
				logger.V(4).Info("Node deletion delayed by an annotation", "annotation", key)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		logger.Info("Deleting the node though its delay-deletion annotations stay", "timeout", a.DelayDeletionTimeout, "err", err.Error())
	}
}

// setTaint adds or removes upstream's ToBeDeletedByClusterAutoscaler taint.
func (a *Actuator) setTaint(ctx context.Context, name string, on bool) error {
	// Upstream's --cordon-node-before-terminating: cordoned with the taint,
	// uncordoned when it is rolled back.
	return setNodeTaint(ctx, a.Client, name, nodetemplate.ToBeDeletedTaint, corev1.TaintEffectNoSchedule, on, a.CordonNode)
}
