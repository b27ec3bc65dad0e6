package capacityscheduling

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	kueuev1beta1 "github.com/quotascale/quotascale/apis/kueue/v1beta1"
	"github.com/quotascale/quotascale/quota/elastic"
)

// quotaCache is the plugin's view of the quota tree in force and of the pods
// charged to it. Informer handlers, queueing hints and the scheduling cycle share
// it under one exclusive lock: even admission uses the tree's scratch buffer, and
// every critical section is a few hundred nanoseconds.
type quotaCache struct {
	mu sync.Mutex

	// tree is the tree in force, nil when there is none. It tracks the pods
	// charged to it, so a swap re-charges them without a list.
	tree *elastic.Tree
	// lifecycle records what was decided about every ElasticQuotaTree object.
	lifecycle treeLifecycle

	// flavors maps ResourceFlavor names to their node labels.
	flavors map[string]map[string]string
	// holds are reclaims this scheduler made, by preemptor. The quota a reclaim
	// frees is charged to the tree under the hold's own UID as soon as the
	// victims are chosen, so no other pod takes it before the preemptor is
	// placed; the hold ends when the preemptor is reserved or deleted.
	holds map[types.UID]*hold
	// changed is set whenever usage or the tree changed since the last status
	// write.
	changed bool

	podLister corelisters.PodLister
}

type hold struct {
	namespace string
	requests  corev1.ResourceList
	// victims still exist; while any does, the reclaim is in flight.
	victims sets.Set[types.UID]
	started time.Time
}

// holdTTL bounds a hold whose preemptor never gets placed (its node went away,
// say), so that quota is not held back forever.
const holdTTL = 2 * time.Minute

// holdUID is the UID a hold is charged under, distinct from any pod's.
func holdUID(preemptor types.UID) types.UID { return "reclaim-hold/" + preemptor }

func newQuotaCache(podLister corelisters.PodLister) *quotaCache {
	return &quotaCache{
		flavors:   map[string]map[string]string{},
		holds:     map[types.UID]*hold{},
		podLister: podLister,
	}
}

// assigned reports whether the pod occupies capacity: bound to a node and not
// finished.
func assigned(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// updatePod follows a pod through its life: charged once it is assigned,
// released when it finishes.
func (c *quotaCache) updatePod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil || pod.Spec.NodeName == "" {
		return
	}
	if !assigned(pod) {
		// Finished: no longer holds capacity.
		c.releaseLocked(pod.UID)
		return
	}
	c.endHoldLocked(pod.UID)
	if c.tree.AddPod(pod) {
		c.changed = true
	}
}

func (c *quotaCache) deletePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return
	}
	c.endHoldLocked(uid)
	for _, h := range c.holds {
		h.victims.Delete(uid)
	}
	c.releaseLocked(uid)
}

func (c *quotaCache) releaseLocked(uid types.UID) {
	if c.tree.RemovePod(uid) {
		c.changed = true
	}
}

// startHold charges what a reclaim frees to the preemptor's hold.
func (c *quotaCache) startHold(preemptor *corev1.Pod, requests corev1.ResourceList, victims []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree == nil {
		return
	}
	h := &hold{namespace: preemptor.Namespace, requests: requests, victims: sets.New[types.UID](), started: time.Now()}
	for _, v := range victims {
		h.victims.Insert(v.UID)
	}
	c.holds[preemptor.UID] = h
	c.tree.AddRequests(holdUID(preemptor.UID), h.namespace, h.requests)
	c.changed = true
}

func (c *quotaCache) endHoldLocked(preemptor types.UID) {
	if _, ok := c.holds[preemptor]; !ok {
		return
	}
	delete(c.holds, preemptor)
	c.releaseLocked(holdUID(preemptor))
}

// reclaimsInFlight counts victims of this scheduler's reclaims that still exist,
// after ending holds older than holdTTL.
func (c *quotaCache) reclaimsInFlight(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for preemptor, h := range c.holds {
		if now.Sub(h.started) > holdTTL {
			c.endHoldLocked(preemptor)
			continue
		}
		n += h.victims.Len()
	}
	return n
}

// setTree puts a new tree in force. When it replaces nothing, usage is rebuilt
// from the assigned pods the informer holds.
func (c *quotaCache) setTreeLocked(logger klog.Logger, t *elastic.Tree) {
	if t != nil && c.tree == nil && c.podLister != nil {
		pods, err := c.podLister.List(labels.Everything())
		if err != nil {
			logger.Error(err, "Listing pods to rebuild quota usage")
		}
		for _, p := range pods {
			if assigned(p) {
				t.AddPod(p)
			}
		}
	}
	if t == nil {
		c.holds = map[types.UID]*hold{}
	}
	c.tree = t
	c.changed = true
}

func (c *quotaCache) updateFlavor(f *kueuev1beta1.ResourceFlavor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	labels := make(map[string]string, len(f.Spec.NodeLabels))
	for k, v := range f.Spec.NodeLabels {
		labels[k] = v
	}
	c.flavors[f.Name] = labels
}

func (c *quotaCache) deleteFlavor(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flavors, name)
}

// admitLocked checks requests against the tree. A preemptor's own hold is
// released first: it is the room the reclaim made for this very pod. Callers hold
// the lock.
func (c *quotaCache) admitLocked(pod *corev1.Pod, requests corev1.ResourceList) elastic.Verdict {
	h, held := c.holds[pod.UID]
	if !held {
		return c.tree.Admit(pod.Namespace, requests)
	}
	scratch := c.tree.Scratch()
	scratch.Release(h.namespace, h.requests)
	return scratch.Admit(pod.Namespace, requests)
}
