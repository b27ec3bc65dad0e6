package capacityscheduling

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// statusLease is the lease that elects the one scheduler replica writing tree
// status. kube-scheduler's own election does not reach plugins: every replica
// builds its plugins, only the leader schedules.
const statusLease = "quotascale-capacity-scheduling-status"

// statusWriter writes every tree's conditions and the per-node figures of the tree
// in force, at most once per interval rather than on every pod event.
//
// While pods are being charged without pause (a burst of bindings), a tree
// whose only change is its figures is written every busyIntervals intervals
// rather than every interval: each write costs the API server and etcd the
// whole object, a few hundred kilobytes for a large tree, and the figures
// would change again before anyone read them. Once usage has been still for
// an interval, the next tick writes them; a change of conditions or of the
// last valid generation is written at once.
type statusWriter struct {
	cache    *quotaCache
	trees    cache.Store
	client   dynamic.Interface
	interval time.Duration
	// written is when each tree's status was last written, by UID; only
	// writeAll's goroutine uses it.
	written map[types.UID]time.Time
}

// busyIntervals is how many intervals apart the figures are written while
// usage keeps changing.
const busyIntervals = 5

// run elects a leader and writes status while leading, until ctx ends.
func (w *statusWriter) run(ctx context.Context, kube kubernetes.Interface) {
	logger := klog.FromContext(ctx).WithName("status")
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, schedulingv1beta1.EnforcedNamespace, statusLease,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		logger.Error(err, "Creating the status lease lock; tree status will not be written")
		return
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   15 * time.Second,
			RenewDeadline:   10 * time.Second,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Name:            statusLease,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					logger.V(2).Info("Writing ElasticQuotaTree status")
					wait.UntilWithContext(ctx, w.writeAll, w.interval)
				},
				OnStoppedLeading: func() { logger.V(2).Info("Stopped writing ElasticQuotaTree status") },
			},
		})
	}
}

func (w *statusWriter) writeAll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if w.written == nil {
		w.written = map[types.UID]time.Time{}
	}
	now := w.cache.clock.Now()
	w.cache.mu.Lock()
	busy := now.Sub(w.cache.changedAt) < w.interval
	w.cache.mu.Unlock()
	present := make(map[types.UID]bool, len(w.written))
	for _, obj := range w.trees.List() {
		t, ok := obj.(*schedulingv1beta1.ElasticQuotaTree)
		if !ok {
			continue
		}
		present[t.UID] = true
		desired, ok := w.desiredStatus(t)
		if !ok || apiequality.Semantic.DeepEqual(desired, t.Status) {
			continue
		}
		if busy && figuresOnly(desired, t.Status) && now.Sub(w.written[t.UID]) < busyIntervals*w.interval {
			continue
		}
		stampQuotas(&desired, t.Status, now)
		if err := w.write(ctx, t, desired); err != nil {
			// A conflict or a deleted tree is retried, or dropped, at the
			// next tick; neither counts as written.
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				logger.Error(err, "Writing ElasticQuotaTree status", "tree", klog.KObj(t))
			}
			continue
		}
		w.written[t.UID] = now
	}
	// Deleted trees are forgotten.
	maps.DeleteFunc(w.written, func(uid types.UID, _ time.Time) bool { return !present[uid] })
}

// figuresOnly says that desired differs from current in status.quotas alone.
func figuresOnly(desired, current schedulingv1beta1.ElasticQuotaTreeStatus) bool {
	desired.Quotas, current.Quotas = nil, nil
	desired.QuotasTime, current.QuotasTime = nil, nil
	return apiequality.Semantic.DeepEqual(desired, current)
}

// stampQuotas sets quotasTime to now when desired's figures differ from
// current's, and drops it with them: it says when the figures written were
// measured, so that readers can tell the age of their held part.
func stampQuotas(desired *schedulingv1beta1.ElasticQuotaTreeStatus, current schedulingv1beta1.ElasticQuotaTreeStatus, now time.Time) {
	switch {
	case desired.Quotas == nil:
		desired.QuotasTime = nil
	case !apiequality.Semantic.DeepEqual(desired.Quotas, current.Quotas) || current.QuotasTime == nil:
		desired.QuotasTime = &metav1.Time{Time: now}
	}
}

// desiredStatus is t's status as the plugin sees it; false when the plugin has
// not decided about this generation yet.
func (w *statusWriter) desiredStatus(t *schedulingv1beta1.ElasticQuotaTree) (schedulingv1beta1.ElasticQuotaTreeStatus, bool) {
	w.cache.mu.Lock()
	defer w.cache.mu.Unlock()
	if w.cache.trial != nil {
		// A trial placement charges a gang that is not admitted; it is
		// undone within the cycle, and the next write shows the usage.
		return schedulingv1beta1.ElasticQuotaTreeStatus{}, false
	}
	d, ok := w.cache.lifecycle.decisions[t.Namespace+"/"+t.Name]
	if !ok || d.ref.uid != t.UID || d.ref.generation != t.Generation {
		return schedulingv1beta1.ElasticQuotaTreeStatus{}, false
	}
	status := *t.Status.DeepCopy()
	status.ObservedGeneration = t.Generation
	meta.SetStatusCondition(&status.Conditions, validCondition(d))
	meta.SetStatusCondition(&status.Conditions, d.active)
	status.Quotas = nil
	if inForce := w.cache.lifecycle.inForce; w.cache.tree != nil && inForce.UID == t.UID {
		status.Quotas = w.cache.tree.StatusHeld(w.cache.heldLocked)
		// Persisted so that a restart, of this scheduler or of the
		// autoscaler, enforces the same generation while the spec is invalid.
		status.LastValid = &schedulingv1beta1.TreeGeneration{Generation: inForce.Generation, Spec: *inForce.Spec.DeepCopy()}
	}
	return status, true
}

func (w *statusWriter) write(ctx context.Context, t *schedulingv1beta1.ElasticQuotaTree, status schedulingv1beta1.ElasticQuotaTreeStatus) error {
	updated := t.DeepCopy()
	updated.Status = status
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
	if err != nil {
		return fmt.Errorf("encoding status of ElasticQuotaTree %s/%s: %w", t.Namespace, t.Name, err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetAPIVersion(schedulingv1beta1.SchemeGroupVersion.String())
	u.SetKind("ElasticQuotaTree")
	_, err = w.client.Resource(treesResource).Namespace(t.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of ElasticQuotaTree %s/%s: %w", t.Namespace, t.Name, err)
	}
	return nil
}
