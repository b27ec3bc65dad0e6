// Package clusterstate keeps what the autoscaler knows about each node group
// across loops: how many nodes are registered and still coming, which scale-ups
// failed and for how long a group is backed off.
package clusterstate

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/quota/capacity"
)

// Options configure the registry.
type Options struct {
	// MaxNodeProvisionTime is upstream's --max-node-provision-time: an instance
	// not registered by then counts as a failed scale-up.
	MaxNodeProvisionTime time.Duration
	Backoff              BackoffOptions
}

// Registry tracks node groups between loops. It is used by the loop only.
type Registry struct {
	opts Options
	// firstSeen remembers when an unregistered instance was first seen, to tell
	// when it is past its provisioning time.
	firstSeen map[string]time.Time
	backoffs  map[string]*backoff
	// lastScaleUp is when each group was last increased.
	lastScaleUp map[string]time.Time
	// requests are the scale-ups whose nodes have not all registered: the
	// target asked for and when it is due. One not met by then fails, as
	// upstream's scale-up requests time out after --max-node-provision-time,
	// also when the infrastructure never even created the instances.
	requests map[string]scaleUpRequest
	// failedInstances are failed instances already turned into a backoff, so one
	// failure is not counted twice while its deletion is under way.
	failedInstances map[string]bool
	// ahead remembers since when each group's target has run ahead of its
	// instances by the same amount (upstream's incorrect node group size).
	ahead map[string]aheadRecord
	last  *State
	// failures since the last TakeFailures (failures.go).
	failures []Failure
}

// NewRegistry returns an empty registry.
func NewRegistry(opts Options) *Registry {
	return &Registry{
		opts:            opts,
		firstSeen:       map[string]time.Time{},
		backoffs:        map[string]*backoff{},
		lastScaleUp:     map[string]time.Time{},
		requests:        map[string]scaleUpRequest{},
		failedInstances: map[string]bool{},
		ahead:           map[string]aheadRecord{},
	}
}

// State is the cluster as one loop found it.
type State struct {
	Now    time.Time
	Groups []*GroupState
	byID   map[string]*GroupState
	// Unmanaged are registered nodes that belong to no group.
	Unmanaged int
}

// GroupState is one node group in one loop.
type GroupState struct {
	Group            cloudprovider.NodeGroup
	Target, Min, Max int
	// Registered nodes of the group; Ready ones among them.
	Registered, Ready int
	// Upcoming is what the group has asked for and does not have yet
	// (capacity.UpcomingNodes): target minus registered, and at least the
	// instances without a registered node. A MachineDeployment's
	// spec.replicas runs ahead of its Machines. Capacity limits count this.
	// Nodes are the group's registered nodes.
	Nodes    []*corev1.Node
	Upcoming int
	// Unregistered are instances without a registered node, failed and late ones
	// included, until they are gone.
	Unregistered []cloudprovider.Instance
	// Failed instances reported a creation error; Late ones are past the
	// provisioning time. Both are to be deleted.
	Failed, Late []cloudprovider.Instance
	// Ahead is how far the target runs ahead of the group's instances not
	// being deleted, registered or not: replicas the infrastructure never
	// started. AheadSince is when the target and the instances first stood
	// this way; it starts over when either changes, as upstream's.
	Ahead      int
	AheadSince time.Time
}

// Provisioning is how many of the upcoming nodes may still register: failed
// and late instances will not, so pods are not promised a place on them.
func (gs *GroupState) Provisioning() int {
	return max(0, gs.Upcoming-len(gs.Failed)-len(gs.Late))
}

// Group returns the state of a group by id.
func (s *State) Group(id string) *GroupState { return s.byID[id] }

// Update reads every group's target and instances against the registered nodes.
// New failures (instances with errors, instances past the provisioning time)
// back their group off.
func (r *Registry) Update(ctx context.Context, provider cloudprovider.CloudProvider, nodes []*corev1.Node, now time.Time) (*State, error) {
	logger := klog.FromContext(ctx)
	registered := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		if n.Spec.ProviderID != "" {
			registered[n.Spec.ProviderID] = n
		}
	}
	state := &State{Now: now, byID: map[string]*GroupState{}}
	present := map[string]bool{}
	seen := map[string]bool{}
	managed := 0
	groups := provider.NodeGroups()
	sort.Slice(groups, func(i, j int) bool { return groups[i].Id() < groups[j].Id() })
	for _, g := range groups {
		if !g.Exist() {
			continue
		}
		target, err := g.TargetSize()
		if err != nil {
			return nil, fmt.Errorf("reading the target size of node group %s: %w", g.Id(), err)
		}
		instances, err := g.Nodes()
		if err != nil {
			return nil, fmt.Errorf("listing the instances of node group %s: %w", g.Id(), err)
		}
		gs := &GroupState{Group: g, Target: target, Min: g.MinSize(), Max: g.MaxSize()}
		present[g.Id()] = true
		failedNow := false
		for _, in := range instances {
			if n, ok := registered[in.Id]; ok {
				gs.Registered++
				gs.Nodes = append(gs.Nodes, n)
				if nodeReady(n) {
					gs.Ready++
				}
				continue
			}
			if in.Status != nil && in.Status.State == cloudprovider.InstanceDeleting {
				continue
			}
			seen[in.Id] = true
			gs.Unregistered = append(gs.Unregistered, in)
			first, ok := r.firstSeen[in.Id]
			if !ok {
				first = now
				r.firstSeen[in.Id] = now
			}
			switch {
			case in.Status != nil && in.Status.ErrorInfo != nil:
				gs.Failed = append(gs.Failed, in)
				if !r.failedInstances[in.Id] {
					r.failedInstances[in.Id] = true
					failedNow = true
					r.fail(g.Id(), *in.Status.ErrorInfo, now)
					logger.Info("Instance creation failed; backing off node group", "nodeGroup", g.Id(), "instance", in.Id,
						"errorCode", in.Status.ErrorInfo.ErrorCode, "error", in.Status.ErrorInfo.ErrorMessage)
				}
			case now.Sub(first) > r.opts.MaxNodeProvisionTime:
				gs.Late = append(gs.Late, in)
				if !r.failedInstances[in.Id] {
					r.failedInstances[in.Id] = true
					failedNow = true
					r.fail(g.Id(), cloudprovider.InstanceErrorInfo{
						ErrorClass:   cloudprovider.OtherErrorClass,
						ErrorCode:    "timeout",
						ErrorMessage: fmt.Sprintf("instance %s did not register within %s", in.Id, r.opts.MaxNodeProvisionTime),
					}, now)
					logger.Info("Instance did not register in time; backing off node group", "nodeGroup", g.Id(), "instance", in.Id)
				}
			}
		}
		gs.Upcoming = capacity.UpcomingNodes(target, gs.Registered, len(gs.Unregistered))
		r.checkAhead(gs, instances, now)
		r.checkRequest(ctx, gs, failedNow, now)
		managed += gs.Registered
		state.Groups = append(state.Groups, gs)
		state.byID[g.Id()] = gs
	}
	for id := range r.firstSeen {
		if !seen[id] {
			delete(r.firstSeen, id)
			delete(r.failedInstances, id)
		}
	}
	for id := range r.requests {
		if !present[id] {
			delete(r.requests, id)
		}
	}
	for id := range r.ahead {
		if !present[id] {
			delete(r.ahead, id)
		}
	}
	state.Unmanaged = len(nodes) - managed
	r.last = state
	return state, nil
}

// aheadRecord is a group's target and instance count, and when the target
// first ran ahead of the instances by their difference.
type aheadRecord struct {
	target, instances int
	since             time.Time
}

// checkAhead sets how far the group's target runs ahead of its instances
// that are not being deleted, and since when.
func (r *Registry) checkAhead(gs *GroupState, instances []cloudprovider.Instance, now time.Time) {
	id := gs.Group.Id()
	live := 0
	for _, in := range instances {
		if in.Status == nil || in.Status.State != cloudprovider.InstanceDeleting {
			live++
		}
	}
	if gs.Target <= live {
		delete(r.ahead, id)
		return
	}
	rec, ok := r.ahead[id]
	if !ok || rec.target != gs.Target || rec.instances != live {
		rec = aheadRecord{target: gs.Target, instances: live, since: now}
		r.ahead[id] = rec
	}
	gs.Ahead, gs.AheadSince = gs.Target-live, rec.since
}

// fail backs a group off for one node that did not come.
func (r *Registry) fail(groupID string, info cloudprovider.InstanceErrorInfo, now time.Time) {
	r.backOff(groupID, info, 1, now)
}

// RegisterFailedScaleUp backs a group off after IncreaseSize itself failed
// to add delta nodes.
func (r *Registry) RegisterFailedScaleUp(groupID string, delta int, err error, now time.Time) {
	r.backOff(groupID, cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "cloudProviderError", ErrorMessage: err.Error()}, delta, now)
}

// scaleUpRequest is a target a scale-up asked for, by how many nodes it
// increased the group (upstream's Increase, which the group's health allows
// for), and when it is due.
type scaleUpRequest struct {
	target, increase int
	due              time.Time
}

// RegisterScaleUp records a successful increase by delta to target; its nodes
// are due within --max-node-provision-time. A later increase of the same group
// extends the request to the new target and due time and adds to its
// increase, as upstream's does.
func (r *Registry) RegisterScaleUp(groupID string, target, delta int, now time.Time) {
	r.lastScaleUp[groupID] = now
	r.requests[groupID] = scaleUpRequest{target: target, increase: r.requests[groupID].increase + delta,
		due: now.Add(r.opts.MaxNodeProvisionTime)}
}

// checkRequest ends a group's scale-up request once its nodes registered, its
// target was lowered below it or one of its instances failed, and fails it
// once it is overdue.
func (r *Registry) checkRequest(ctx context.Context, gs *GroupState, failedNow bool, now time.Time) {
	id := gs.Group.Id()
	req, ok := r.requests[id]
	if !ok {
		return
	}
	switch {
	case failedNow || gs.Registered >= req.target || gs.Target < req.target:
		// A failed instance has backed the group off already.
		delete(r.requests, id)
	case now.After(req.due):
		delete(r.requests, id)
		missing := req.target - gs.Registered
		r.backOff(id, cloudprovider.InstanceErrorInfo{
			ErrorClass:   cloudprovider.OtherErrorClass,
			ErrorCode:    "timeout",
			ErrorMessage: fmt.Sprintf("%d of the %d nodes asked for did not register within %s", missing, req.target, r.opts.MaxNodeProvisionTime),
		}, missing, now)
		klog.FromContext(ctx).Info("Scale-up timed out; backing off node group", "nodeGroup", id, "target", req.target,
			"registered", gs.Registered, "maxNodeProvisionTime", r.opts.MaxNodeProvisionTime)
	}
}

// LastScaleUp is when any group was last increased.
func (r *Registry) LastScaleUp() time.Time {
	var last time.Time
	for _, t := range r.lastScaleUp {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// LastScaleUpOf is when the group was last increased.
func (r *Registry) LastScaleUpOf(groupID string) time.Time { return r.lastScaleUp[groupID] }

// BackedOff reports whether a group is backed off at now, and why.
func (r *Registry) BackedOff(groupID string, now time.Time) (bool, cloudprovider.InstanceErrorInfo) {
	b := r.backoffs[groupID]
	if !b.active(now) {
		return false, cloudprovider.InstanceErrorInfo{}
	}
	return true, b.errorInfo
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
