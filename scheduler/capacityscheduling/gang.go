package capacityscheduling

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	"github.com/quotascale/quotascale/quota/claims"
	"github.com/quotascale/quotascale/quota/elastic"
	"github.com/quotascale/quotascale/quota/gang"
)

// gangPermitTimeout is how long the members of an ACK gang wait at Permit for
// the rest of the gang, as long as kube-scheduler's GangScheduling lets a
// PodGroup's members wait.
const gangPermitTimeout = 5 * time.Minute

// Event reasons about gangs. A refusal by quota is the FailedScheduling
// event's own message; these say what that event cannot.
const (
	eventReasonGangNotAdmitted = "GangNotAdmitted"
	eventReasonGangNeverFits   = "GangNeverFits"
	eventReasonInvalidGang     = "InvalidGang"
)

// gangAsk is what PreFilter decided for a member of a gang that is not wholly
// admitted yet.
type gangAsk struct {
	key      gang.Key
	minCount int32
	// whole is what the gang still asks of its quota: the requests of its
	// first MinCount members not charged yet, this pod's standing in for
	// members not created. Nil when the gang's reservation already holds it.
	whole corev1.ResourceList
	// never is set when whole exceeds a max on the pod's quota path even
	// with nothing else charged: no reclaim can help.
	never bool
}

// podGroupLister returns how the plugin looks PodGroups up: the scheduler's
// own informer where the Workload API is on, nothing otherwise (a pod naming
// a PodGroup then waits with a clear message, as kube-scheduler leaves it).
func podGroupLister(h fwk.Handle) func(namespace, name string) (*schedulingapi.PodGroup, bool) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) || h.SharedInformerFactory() == nil {
		return nil
	}
	lister := h.SharedInformerFactory().Scheduling().V1beta1().PodGroups().Lister()
	return func(namespace, name string) (*schedulingapi.PodGroup, bool) {
		pg, err := lister.PodGroups(namespace).Get(name)
		return pg, err == nil
	}
}

// admitPendingLocked judges a pending pod as PreFilter does: a member of a
// gang not wholly admitted by what its gang still asks (admitGangLocked),
// any other pod by request, its own. ask is nil for a pod judged alone; err
// says the pod's gang cannot ask its quota yet. The caller holds the lock,
// with a tree in force.
func (c *quotaCache) admitPendingLocked(pod *corev1.Pod, request elastic.Request) (*gangAsk, elastic.Verdict, error) {
	ask, verdict, err := c.admitGangLocked(pod, request)
	if err != nil || ask != nil {
		return ask, verdict, err
	}
	return nil, c.admitLocked(pod, request), nil
}

// admitGangLocked decides a pod of a gang. It returns a nil ask for a pod in
// no gang, or of a gang whose first MinCount members are all charged: such a
// pod is judged alone. Otherwise the verdict is the whole gang's, or, while
// the gang's reservation stands, the pod's own against usage without the
// reservation's remaining part. The caller holds the lock, with a tree in
// force.
func (c *quotaCache) admitGangLocked(pod *corev1.Pod, request elastic.Request) (*gangAsk, elastic.Verdict, error) {
	g, isGang, err := gang.Of(pod, c.podGroup)
	if err != nil || !isGang {
		return nil, elastic.Verdict{}, err
	}
	if err := c.gangCompleteLocked(g, pod); err != nil {
		return nil, elastic.Verdict{}, err
	}
	ask := &gangAsk{key: g.Key, minCount: g.MinCount}
	if c.reservations[g.Key] != nil {
		return ask, c.admitGangRequestLocked(pod, g.Key, request.Requests()), nil
	}
	ask.whole = c.gangRequestLocked(g, pod)
	if ask.whole == nil {
		return nil, elastic.Verdict{}, nil
	}
	verdict := c.admitGangRequestLocked(pod, g.Key, ask.whole)
	if !verdict.Admitted() {
		ask.never = !c.tree.AdmitAlone(pod.Namespace, ask.whole).Admitted()
	}
	return ask, verdict, nil
}

// gangCompleteLocked refuses a member of an ACK gang with fewer live pods
// than its min-available: the gang waits for the rest without holding quota,
// as kube-scheduler keeps a PodGroup's pods out of its queue until minCount
// exist. (Its GangScheduling does that for PodGroups only.)
func (c *quotaCache) gangCompleteLocked(g gang.Gang, pod *corev1.Pod) error {
	if g.Key.Kind != gang.KindLabels {
		return nil
	}
	count := c.gangPods.size(g.Key)
	if !c.gangPods.filed(g.Key, pod.UID) {
		count++
	}
	if count >= int(g.MinCount) {
		return nil
	}
	return fmt.Errorf("gang %s has %d of its %d pods; waiting for the rest before asking its quota", g.Key, count, g.MinCount)
}

// gangRequestLocked is what gang g still asks of its quota for pod
// (gang.Outstanding): the members this tree charges, bound or reserved here,
// hold their own quota. It is nil when the gang is whole. The answer is kept
// until the gang's members or their charges change (gangAsked), so that the
// members' requests are summed once, not on every attempt of every member.
func (c *quotaCache) gangRequestLocked(g gang.Gang, pod *corev1.Pod) corev1.ResourceList {
	if a, ok := c.gangAsked[g.Key]; ok && a.minCount == g.MinCount && (a.standIns == 0 || a.pod == pod) {
		return a.request
	}
	members := gang.Members(g.Key, c.gangPods.pods(g.Key))
	whole, standIns, ok := gang.Outstanding(g, members, func(m *corev1.Pod) bool { return c.tree.Tracks(m.UID) }, pod, c.gangChargerLocked())
	if !ok {
		whole = nil
	}
	c.gangAsked[g.Key] = gangAsked{minCount: g.MinCount, pod: pod, standIns: standIns, request: whole}
	return whole
}

// gangChargerLocked charges a gang's members as PreFilter charges a pod
// (requestLocked): their devices count in the gang's request, and a claim
// they share counts once, unless the tree charges it already. Callers hold
// the lock, with a tree in force.
func (c *quotaCache) gangChargerLocked() gang.Charger {
	return gang.Charger{
		Charge: func(m *corev1.Pod) claims.Charge {
			ch, _ := c.chargeLocked(m)
			return ch
		},
		SharedCharged: c.sharedChargedLocked,
	}
}

// gangAsked is a gang's outstanding request as last computed, for pod when
// pod's requests stood in for members not created.
type gangAsked struct {
	minCount int32
	pod      *corev1.Pod
	standIns int
	request  corev1.ResourceList
}

// admitGangRequestLocked admits requests for a member of gang key as if the
// gang's reservation, and the reclaim holds of its members, were not
// charged: they are the room kept for this very gang. While the gang is on
// trial for a reclaim, the victims count as gone too.
func (c *quotaCache) admitGangRequestLocked(pod *corev1.Pod, key gang.Key, requests corev1.ResourceList) elastic.Verdict {
	var held corev1.ResourceList
	if r := c.reservations[key]; r != nil {
		held = r.remaining
	}
	for _, h := range c.holds {
		if h.charged && h.gang == key {
			held = addLists(held, h.requests)
		}
	}
	if t := c.trial; t != nil && t.gang == key {
		scratch := c.tree.Without(t.victims)
		scratch.Release(pod.Namespace, held)
		return scratch.Admit(pod.Namespace, requests)
	}
	if held == nil {
		return c.tree.Admit(pod.Namespace, requests)
	}
	return c.tree.AdmitBesides(pod.Namespace, requests, held)
}

// gangRefusal is PreFilter's message for a gang its quota refused. It names
// the gang and its size, then the quota nodes and resources as any refusal.
func gangRefusal(ask *gangAsk, verdict elastic.Verdict) string {
	if ask.never {
		return fmt.Sprintf("gang %s of %d pods can never fit its quota, whatever else runs: %s", ask.key, ask.minCount, verdict.Message())
	}
	return fmt.Sprintf("gang %s of %d pods does not fit its quota: %s", ask.key, ask.minCount, verdict.Message())
}

// noteGangRefusalLocked remembers the refusal of a gang for
// PodGroupPostFilter, and says whether an impossible gang is reported for
// the first time (with this message).
func (c *quotaCache) noteGangRefusalLocked(ask *gangAsk, message string) (firstNever bool) {
	c.gangRefusals[ask.key] = message
	if !ask.never {
		delete(c.gangsNever, ask.key)
		return false
	}
	if c.gangsNever[ask.key] == message {
		return false
	}
	c.gangsNever[ask.key] = message
	return true
}

// reserveGangLocked charges a member of a gang at Reserve. The first member
// re-checks the whole gang, as Reserve re-checks a pod: an informer may have
// charged something since PreFilter.
func (p *Plugin) reserveGangLocked(pod *corev1.Pod, s *stateData) *fwk.Status {
	c := p.cache
	ask := s.gang
	if c.reservations[ask.key] == nil {
		whole := ask.whole
		if whole == nil {
			// PreFilter found the reservation, which ended since.
			if whole = c.gangRequestLocked(gang.Gang{Key: ask.key, MinCount: ask.minCount}, pod); whole == nil {
				return p.reserveAloneLocked(pod, s)
			}
		}
		if v := c.admitGangRequestLocked(pod, ask.key, whole); !v.Admitted() {
			return fwk.NewStatus(fwk.Unschedulable, gangRefusal(ask, v))
		}
		delete(c.gangRefusals, ask.key)
		c.reserveMemberLocked(pod, ask.key, ask.minCount, whole, s)
		return nil
	}
	if v := c.admitGangRequestLocked(pod, ask.key, s.request.Requests()); !v.Admitted() {
		return fwk.NewStatus(fwk.Unschedulable, gangRefusal(ask, v))
	}
	c.reserveMemberLocked(pod, ask.key, ask.minCount, nil, s)
	return nil
}

// reserveAloneLocked is Reserve for a pod judged alone.
func (p *Plugin) reserveAloneLocked(pod *corev1.Pod, s *stateData) *fwk.Status {
	if v := p.cache.admitLocked(pod, s.request); !v.Admitted() {
		return fwk.NewStatus(fwk.Unschedulable, v.Message())
	}
	p.cache.reserveLocked(pod, s)
	return nil
}

// unreserveGang rejects the members of pod's gang still waiting at Permit
// when pod left the gang's reservation before the gang was whole, so that
// the gang's quota is released at once rather than member by member as
// their waits time out.
func (p *Plugin) unreserveGang(ctx context.Context, pod *corev1.Pod, release gangRelease) {
	logger := klog.FromContext(ctx)
	if len(release.activate) > 0 {
		logger.V(4).Info("A gang's quota reservation ended; activating the gangs quota refused", "pod", klog.KObj(pod), "pods", len(release.activate))
		p.handle.Activate(logger, release.activate)
	}
	if len(release.reject) == 0 {
		return
	}
	key, _ := gang.RefOf(pod)
	msg := fmt.Sprintf("pod %s of gang %s left the gang's quota reservation before the gang was whole", klog.KObj(pod), key)
	for _, uid := range release.reject {
		if wp := p.handle.GetWaitingPod(uid); wp != nil {
			wp.Reject(Name, msg)
		}
	}
	logger.V(4).Info("Rejecting the gang's other waiting members", "pod", klog.KObj(pod), "gang", key, "waiting", len(release.reject))
}

// isSchedulableAfterGangPodAdded requeues a member of an ACK gang that
// waited for its gang's pods when another of them is created.
func (p *Plugin) isSchedulableAfterGangPodAdded(_ klog.Logger, pending *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added := podOf(newObj)
	if added == nil {
		return fwk.Queue, nil
	}
	want, ok := gang.RefOf(pending)
	if got, inGang := gang.RefOf(added); ok && inGang && got == want && want.Kind == gang.KindLabels {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// Permit holds the members of an ACK gang until MinCount of them are
// reserved, then lets them all go to binding together. kube-scheduler's own
// GangScheduling does this for a Workload API PodGroup; ACK's labels have
// nothing else that would.
func (p *Plugin) Permit(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := gang.RefOf(pod)
	if !ok || key.Kind != gang.KindLabels {
		return nil, 0
	}
	p.cache.mu.Lock()
	r := p.cache.reservations[key]
	var waiting []types.UID
	whole := true
	if r != nil {
		whole = r.reserved.Len()+r.bound.Len() >= int(r.minCount)
		waiting = r.reserved.UnsortedList()
	}
	p.cache.mu.Unlock()
	if !whole {
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d pods of gang %s to be placed", r.minCount, key)), gangPermitTimeout
	}
	for _, uid := range waiting {
		if wp := p.handle.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
		}
	}
	return nil, 0
}

// PodGroupPostFilter takes DefaultPreemption's place for pod groups, as
// PostFilter does for pods (DefaultPreemption is disabled at both). A group no
// tree governs preempts exactly as DefaultPreemption would. A gang its quota
// refused is explained: kube-scheduler tries a PodGroup's pods in one cycle
// and stops at the first refusal, so only that pod's FailedScheduling event
// carries the quota's reason; this records it on every pod of the group, and
// returns it so that kube-scheduler's own PodGroupInitiallyScheduled
// condition names the quota. Before that, such a gang reclaims, as a pod
// its quota refused does at PostFilter, for the whole of what it still asks
// (reclaimForPodGroup); only a reclaim that evicted nobody is reported. A
// governed group its quota admitted does not preempt: DefaultPreemption's
// group preemption knows no quota and could take another team below its min.
func (p *Plugin) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	if status := unresolvedBeforePreFilter(state, pgInfo); status != nil {
		return nil, status
	}
	key := gang.Key{Kind: gang.KindPodGroup, Namespace: pgInfo.GetNamespace(), Name: pgInfo.GetName()}
	p.cache.mu.Lock()
	governed := false
	if p.cache.tree != nil {
		_, governed = p.cache.tree.LeafFor(key.Namespace)
	}
	msg, refused := p.cache.gangRefusals[key]
	p.cache.mu.Unlock()
	switch {
	case !governed:
		return p.defaultPreemption.PodGroupPostFilter(ctx, state, pgInfo, schedule)
	case !refused:
		return nil, fwk.NewStatus(fwk.Unschedulable, "pod group preemption: not run for a pod group under an ElasticQuotaTree")
	}
	result, status := p.reclaimForPodGroup(ctx, key, pgInfo, schedule)
	if status.IsSuccess() {
		return result, status
	}
	if status.IsError() {
		klog.FromContext(ctx).Error(status.AsError(), "Reclaiming quota for a gang", "gang", key)
	}
	msg += "; " + status.Message()
	if recorder := p.handle.EventRecorder(); recorder != nil {
		for _, pod := range pgInfo.GetUnscheduledPods() {
			recorder.Eventf(pod, nil, corev1.EventTypeWarning, eventReasonGangNotAdmitted, "Scheduling", "%s", msg)
		}
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// warnBadGang records, once per pod and problem, an event on a pending pod
// whose gang cannot be read: ACK labels with a bad min-available, or a
// PodGroup that does not exist. kube-scheduler keeps a pod of a missing
// PodGroup out of its queue without a word, so this is where its owner hears.
func (p *Plugin) warnBadGang(pod *corev1.Pod) {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return
	}
	if _, named := gang.RefOf(pod); !named {
		return
	}
	_, _, err := gang.Of(pod, p.cache.podGroup)
	p.cache.mu.Lock()
	seen := p.cache.gangWarned[pod.UID]
	if err == nil || seen == err.Error() {
		if err == nil {
			delete(p.cache.gangWarned, pod.UID)
		}
		p.cache.mu.Unlock()
		return
	}
	p.cache.gangWarned[pod.UID] = err.Error()
	p.cache.mu.Unlock()
	recorder := p.handle.EventRecorder()
	if !*p.args.WriteStatus || recorder == nil {
		return
	}
	note := err.Error()
	if errors.Is(err, gang.ErrPodGroupNotFound) {
		note += "; the pod waits until the PodGroup exists"
	}
	recorder.Eventf(pod, nil, corev1.EventTypeWarning, eventReasonInvalidGang, "Scheduling", "%s", note)
}
