package capacityscheduling

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	schedulingv1beta1 "github.com/quotascale/quotascale/apis/scheduling/v1beta1"
)

// Leadership tells the plugin whether its scheduler replica leads.
// kube-scheduler builds the plugins of every replica but schedules only on the
// one its leader election chose: only that replica holds the reservations,
// holds and gang reservations that tree status must show, so only that one
// writes it. The zero value does not lead.
type Leadership struct {
	leading atomic.Bool
}

// SetLeading says whether this replica leads from now on.
func (l *Leadership) SetLeading(leading bool) { l.leading.Store(leading) }

// Leading says whether this replica leads; a nil Leadership never does.
func (l *Leadership) Leading() bool { return l != nil && l.leading.Load() }

// Factory is the plugin's factory for a scheduler that reports through l
// whether it leads; its status writer writes only while l says so.
func (l *Leadership) Factory() frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return build(ctx, obj, h, l)
	}
}

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
	// leading says whether this scheduler replica leads; synced, whether
	// usage has been rebuilt from every pod and claim since the start. A
	// standby or a fresh start would otherwise publish usage without the
	// leader's reservations, or near zero.
	leading, synced func() bool
	// written is when each tree's status was last written, by UID; state is
	// why the last tick did not write, or "writing". Only run's goroutine
	// uses them.
	written map[types.UID]time.Time
	state   string
}

// busyIntervals is how many intervals apart the figures are written while
// usage keeps changing.
const busyIntervals = 5

// startStatusWriter writes tree status from this replica while leadership says
// it leads, until ctx ends.
func (p *Plugin) startStatusWriter(ctx context.Context, client dynamic.Interface, leadership *Leadership) {
	w := &statusWriter{cache: p.cache, trees: p.trees.GetStore(), client: client, interval: p.args.StatusUpdateInterval.Duration,
		leading: leadership.Leading, synced: p.usageSynced}
	go w.run(klog.NewContext(ctx, klog.FromContext(ctx).WithName(Name).WithName("status")))
}

// usageSynced says whether the pod and claim handlers have seen every object
// once. The tree and flavor handlers have: the plugin is built only then.
func (p *Plugin) usageSynced() bool {
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	return p.podsSyncedLocked()
}

// run ticks every interval until ctx ends.
func (w *statusWriter) run(ctx context.Context) {
	wait.UntilWithContext(ctx, w.tick, w.interval)
}

// tick writes status if this replica leads and its usage is rebuilt.
func (w *statusWriter) tick(ctx context.Context) {
	logger := klog.FromContext(ctx)
	why := w.notWriting()
	w.logChange(logger, why)
	if why != "" {
		logger.V(5).Info("Skipping ElasticQuotaTree status", "reason", why)
		return
	}
	w.writeAll(ctx)
}

// notWriting is why this replica may not write status now; empty when it may.
func (w *statusWriter) notWriting() string {
	switch {
	case !w.leading():
		return "this scheduler replica does not lead"
	case !w.synced():
		return "usage is still being rebuilt from the assigned pods"
	}
	return ""
}

// logChange logs when the writer starts writing, or stops for a new reason.
func (w *statusWriter) logChange(logger klog.Logger, why string) {
	state := cmp.Or(why, "writing")
	if state == w.state {
		return
	}
	w.state = state
	if why == "" {
		logger.V(2).Info("Writing ElasticQuotaTree status")
		return
	}
	logger.V(2).Info("Not writing ElasticQuotaTree status", "reason", why)
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
