// Package capacityquota caps scale-ups by CapacityQuota (autoscaling.x-k8s.io/
// v1beta1): every proposed node group is checked against every valid quota whose
// selector matches its template node, and against the autoscaler's cluster-wide
// limits, merged in as the quota "cluster-wide". Usage is the registered matching
// nodes' capacity plus every group's upcoming nodes (its target minus its
// registered nodes, at least its instances not yet registered, in backoff or
// past their provisioning time alike, until they are gone) plus the nodes
// planned earlier in the same loop, so that provisioning never overshoots a
// limit.
package capacityquota

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	autoscalingv1beta1 "github.com/quotascale/quotascale/apis/autoscaling/v1beta1"
	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/processors"
	"github.com/quotascale/quotascale/quota/capacity"
)

// Lister lists the CapacityQuota objects.
type Lister func() ([]*autoscalingv1beta1.CapacityQuota, error)

// Options configure the processor.
type Options struct {
	// Enabled enforces CapacityQuota objects; the cluster-wide limits apply
	// regardless, as upstream's --cores-total and friends always do.
	Enabled bool
	// ClusterWide are the --cores-total, --memory-total and --max-nodes-total
	// maxima; nil when none.
	ClusterWide autoscalingv1beta1.ResourceList
	// ForbiddenSelectorKeys override the default forbidden node labels.
	ForbiddenSelectorKeys []string
	// EventInterval rate-limits the events on a quota that blocks a scale-up.
	EventInterval time.Duration
}

// Processor is a ScaleUpLimiter and the source of the quotas' status and metrics.
type Processor struct {
	opts     Options
	list     Lister
	recorder record.EventRecorder
	metrics  *Metrics

	mu  sync.Mutex
	set *capacity.Set
	// built is false until the first loop has built the quotas, the cluster-wide
	// one included.
	built   bool
	objects map[string]*autoscalingv1beta1.CapacityQuota
	// seen is what the last loop saw of each object, to tell writes that
	// changed a spec (which the set must see) from status writes.
	seen map[string]objectVersion
	// upcoming and planned are per group in the current loop.
	upcoming map[string]int
	planned  map[string]int
	// known are the groups the set holds (upcoming nodes or a remembered
	// check), so that a group gone from the provider is forgotten.
	known     map[string]bool
	lastEvent map[string]time.Time
	devices   *nodeDevices
	// exceeded are, per group, the quotas that held its last headroom of
	// this loop below what was wanted, for GangCapped.
	exceeded map[string][]capacity.Exceeded
}

var _ processors.ScaleUpLimiter = &Processor{}

// New builds a processor fed by the node informer's events and the quota lister.
func New(opts Options, list Lister, nodes cache.SharedIndexInformer, recorder record.EventRecorder, metrics *Metrics) (*Processor, error) {
	if opts.EventInterval == 0 {
		opts.EventInterval = 5 * time.Minute
	}
	p := &Processor{
		opts: opts, list: list, recorder: recorder, metrics: metrics,
		set:       capacity.Build(nil, capacity.Options{ForbiddenSelectorKeys: opts.ForbiddenSelectorKeys}),
		objects:   map[string]*autoscalingv1beta1.CapacityQuota{},
		seen:      map[string]objectVersion{},
		planned:   map[string]int{},
		known:     map[string]bool{},
		lastEvent: map[string]time.Time{},
		devices:   newNodeDevices(),
	}
	if nodes == nil {
		return p, nil
	}
	_, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.onNode(obj, false) },
		UpdateFunc: func(_, obj any) { p.onNode(obj, false) },
		DeleteFunc: func(obj any) { p.onNode(obj, true) },
	})
	if err != nil {
		return nil, fmt.Errorf("node handler: %w", err)
	}
	return p, nil
}

func (p *Processor) onNode(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// A virtual kubelet fronts capacity elsewhere (a serverless pool): as
	// upstream, it counts toward no quota and no cluster-wide limit. A node
	// relabelled as virtual stops counting.
	if deleted {
		delete(p.devices.raw, node.Name)
	} else {
		p.devices.raw[node.Name] = node
	}
	if deleted || isVirtualKubelet(node) {
		p.set.RemoveNode(node.Name)
		return
	}
	p.set.UpdateNode(p.devices.counted(node))
}

// isVirtualKubelet is upstream's test for a virtual-kubelet node.
func isVirtualKubelet(node *corev1.Node) bool { return node.Labels["type"] == "virtual-kubelet" }

// StartLoop rebuilds the quotas when an object changed and sets every group's
// upcoming nodes; groups that are gone or have no template count nothing.
func (p *Processor) StartLoop(ctx context.Context, lc *processors.LoopContext) error {
	quotas, err := p.list()
	if err != nil {
		return fmt.Errorf("listing CapacityQuotas: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.opts.Enabled {
		quotas = nil
	}
	written, specChanged := p.changed(quotas)
	if specChanged {
		all := append([]*autoscalingv1beta1.CapacityQuota(nil), quotas...)
		if len(p.opts.ClusterWide) > 0 {
			all = append(all, capacity.ClusterWide(p.opts.ClusterWide))
		}
		p.set = p.set.Rebuild(all, capacity.Options{ForbiddenSelectorKeys: p.opts.ForbiddenSelectorKeys})
		p.built = true
		klog.FromContext(ctx).V(2).Info("CapacityQuotas changed", "quotas", len(quotas))
	}
	if written {
		p.objects = map[string]*autoscalingv1beta1.CapacityQuota{}
		p.seen = map[string]objectVersion{}
		for _, q := range quotas {
			p.objects[q.Name] = q
			p.seen[q.Name] = versionOf(q)
		}
	}
	p.refreshDevicesLocked(ctx)
	p.upcoming = lc.Upcoming
	p.planned = map[string]int{}
	p.exceeded = map[string][]capacity.Exceeded{}
	present := make(map[string]bool, len(lc.Groups))
	for _, g := range lc.Groups {
		present[g.Id()] = true
		p.setUpcomingLocked(ctx, g.Id(), lc.Templates[g.Id()])
	}
	for id := range p.known {
		if !present[id] {
			p.setUpcomingLocked(ctx, id, nil)
		}
	}
	p.metrics.observe(p.set.Status(), p.objects, p.opts.ClusterWide)
	return nil
}

// objectVersion identifies one write of a quota object and its spec.
type objectVersion struct {
	uid             types.UID
	resourceVersion string
	generation      int64
}

func versionOf(q *autoscalingv1beta1.CapacityQuota) objectVersion {
	return objectVersion{uid: q.UID, resourceVersion: q.ResourceVersion, generation: q.Generation}
}

// changed tells whether any quota object was written since the last loop, and
// whether one's spec may have changed. The API server bumps a CapacityQuota's
// generation on spec changes only (status is a subresource), so the status
// this autoscaler writes as usage moves does not rebuild the set. An object
// without a generation counts every write as a spec change.
func (p *Processor) changed(quotas []*autoscalingv1beta1.CapacityQuota) (written, spec bool) {
	if !p.built || len(quotas) != len(p.seen) {
		return true, true
	}
	for _, q := range quotas {
		last, ok := p.seen[q.Name]
		now := versionOf(q)
		switch {
		case !ok || last.uid != now.uid:
			return true, true
		case last.resourceVersion == now.resourceVersion:
		case now.generation == 0 || last.generation != now.generation:
			return true, true
		default:
			written = true
		}
	}
	return written, false
}

// setUpcomingLocked counts the group's upcoming and planned nodes as copies of
// its template, devices included. Without a template the group counts none
// and the set forgets it; with a template and none upcoming its remembered
// check stays.
func (p *Processor) setUpcomingLocked(ctx context.Context, id string, template *cloudprovider.NodeInfo) {
	if template == nil {
		p.set.SetUpcoming(id, 0, nil)
		delete(p.known, id)
		delete(p.devices.templates, id)
		return
	}
	p.set.SetUpcoming(id, p.upcoming[id]+p.planned[id], p.devices.template(ctx, id, template))
	p.known[id] = true
}

// countedTemplate is template with the devices of the group's template
// ResourceSlices in capacity, when template is the loop's template of group.
func (p *Processor) countedTemplate(ctx context.Context, lc *processors.LoopContext, id string, template *corev1.Node) *corev1.Node {
	if info := lc.Templates[id]; info != nil && info.Node == template {
		return p.devices.template(ctx, id, info)
	}
	return template
}

// Headroom is how many of wanted new nodes of group every matching quota allows,
// with CA's reason text for each quota that binds.
func (p *Processor) Headroom(ctx context.Context, lc *processors.LoopContext, group cloudprovider.NodeGroup, template *corev1.Node, wanted int) (int, []processors.Reason) {
	p.mu.Lock()
	allowed, exceeded := p.set.AllowedDeltaFor(group.Id(), p.countedTemplate(ctx, lc, group.Id(), template), wanted)
	p.known[group.Id()] = true
	if p.exceeded != nil {
		p.exceeded[group.Id()] = exceeded
	}
	p.mu.Unlock()
	if allowed >= wanted {
		return allowed, nil
	}
	reasons := make([]processors.Reason, 0, len(exceeded))
	for _, e := range exceeded {
		reasons = append(reasons, processors.NewReason(processors.MessageNodeGroupSkipped, e.Reason()))
		for _, r := range e.Resources {
			p.metrics.blocked(e.Quota, string(r), group.Id())
		}
		p.eventOnQuota(ctx, lc.Now, e, group, allowed)
	}
	return allowed, reasons
}

// Planned counts nodes decided in this loop as upcoming, so the next group
// checked in the loop sees them.
func (p *Processor) Planned(ctx context.Context, lc *processors.LoopContext, group cloudprovider.NodeGroup, _ *corev1.Node, count int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.planned[group.Id()] += count
	p.setUpcomingLocked(ctx, group.Id(), lc.Templates[group.Id()])
}

// eventOnQuota tells the quota's readers, at most once per EventInterval per
// quota and node group, that it blocked a scale-up.
func (p *Processor) eventOnQuota(ctx context.Context, now time.Time, e capacity.Exceeded, group cloudprovider.NodeGroup, allowed int) {
	obj := p.objects[e.Quota]
	if obj == nil || p.recorder == nil {
		return
	}
	key := e.Quota + "/" + group.Id()
	if last, ok := p.lastEvent[key]; ok && now.Sub(last) < p.opts.EventInterval {
		return
	}
	p.lastEvent[key] = now
	ref := &corev1.ObjectReference{APIVersion: autoscalingv1beta1.SchemeGroupVersion.String(), Kind: "CapacityQuota", Name: obj.Name, UID: obj.UID}
	p.recorder.Eventf(ref, corev1.EventTypeWarning, "ScaleUpBlocked",
		"node group %s may grow by %d node(s) only: %s", group.Id(), allowed, e.Reason())
	klog.FromContext(ctx).V(2).Info("CapacityQuota blocks a scale-up", "quota", e.Quota, "nodeGroup", group.Id(), "allowed", allowed)
}

// Statuses returns the status the autoscaler's leader writes on each quota
// object, sorted by name.
func (p *Processor) Statuses() []Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Status
	for _, s := range p.set.Status() {
		obj := p.objects[s.Name]
		if obj == nil {
			continue // the cluster-wide quota has no object
		}
		st := Status{Object: obj, Quota: s}
		st.DeviceClassMissing, st.DeviceNotes = p.devices.deviceNotes(obj)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object.Name < out[j].Object.Name })
	return out
}

// Status pairs a quota object with what the processor computed for it.
type Status struct {
	Object *autoscalingv1beta1.CapacityQuota
	Quota  capacity.QuotaStatus
	// DeviceNotes say why a device-class limit counts fewer devices than its
	// class's nodes publish (deviceNotes); DeviceClassMissing when one names
	// a class the cluster does not have.
	DeviceClassMissing bool
	DeviceNotes        []string
}

// ListerFrom adapts an informer store of typed CapacityQuotas.
func ListerFrom(store cache.Store) Lister {
	return func() ([]*autoscalingv1beta1.CapacityQuota, error) {
		var out []*autoscalingv1beta1.CapacityQuota
		for _, obj := range store.List() {
			if q, ok := obj.(*autoscalingv1beta1.CapacityQuota); ok {
				out = append(out, q)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
}
