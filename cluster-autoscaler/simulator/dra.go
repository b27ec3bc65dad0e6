package simulator

import (
	"errors"
	"fmt"
	"sync/atomic"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	feature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"
)

// draState is what a snapshot adds to the cluster's Dynamic Resource
// Allocation objects: the ResourceSlices of the nodes the simulation added
// (template copies publish the devices their group's nodes will have) and the
// claims it allocated to the pods it placed. The DynamicResources plugin reads
// the cluster's objects with these on top (simulatedDRA), so that a pod with
// claims fits a node that does not exist yet, and a device given to one
// simulated pod is not given to the next. Fork and Revert undo these changes
// together with the nodes and pods.
type draState struct {
	// slices are the added nodes' slices, in the order the nodes were added:
	// a Revert drops those past the fork's length.
	slices []*resourcev1.ResourceSlice
	// claims are the claims the simulation allocated, by claimKey.
	claims map[string]*resourcev1.ResourceClaim
	// undo are the claims as they were before each change since the oldest
	// open fork (nil: not allocated by the simulation).
	undo []claimUndo
	// stamp names the state: it changes with every change, and a Revert
	// puts back the stamp of the state it returns to. A PreFilter run is
	// current as long as the stamp it saw is (see PodCheck).
	stamp uint64
}

type claimUndo struct {
	key  string
	prev *resourcev1.ResourceClaim
}

// stamps hands out draState stamps, unique in the process so that a check
// never mistakes one snapshot's state for another's.
var stamps atomic.Uint64

func newStamp() uint64 { return stamps.Add(1) }

// claimKey keys a claim of the cluster by namespace and name.
func claimKey(namespace, name string) string { return namespace + "/" + name }

// inMemoryKey keys a claim that exists in no API (the scheduler's claim for
// extended resources backed by devices, whose name every pod's shares) by
// its UID, which is its own.
func inMemoryKey(claim *resourcev1.ResourceClaim) string { return "uid:" + string(claim.UID) }

// addSlices adds the slices of a node the simulation added.
func (s *Snapshot) addSlices(slices []*resourcev1.ResourceSlice) {
	if len(slices) == 0 {
		return
	}
	s.dra.slices = append(s.dra.slices, slices...)
	s.dra.stamp = newStamp()
}

// setClaim records claim, keyed key, as the simulation allocated it.
func (s *Snapshot) setClaim(key string, claim *resourcev1.ResourceClaim) {
	if len(s.forks) > 0 {
		s.dra.undo = append(s.dra.undo, claimUndo{key: key, prev: s.dra.claims[key]})
	}
	if s.dra.claims == nil {
		s.dra.claims = map[string]*resourcev1.ResourceClaim{}
	}
	s.dra.claims[key] = claim
	s.dra.stamp = newStamp()
}

// draMark is where the DRA state stood at a Fork.
type draMark struct {
	slices, undo int
	stamp        uint64
}

func (s *Snapshot) draMark() draMark {
	return draMark{slices: len(s.dra.slices), undo: len(s.dra.undo), stamp: s.dra.stamp}
}

// revertDRA undoes the DRA changes since m.
func (s *Snapshot) revertDRA(m draMark) {
	for j := len(s.dra.undo) - 1; j >= m.undo; j-- {
		u := s.dra.undo[j]
		if u.prev != nil {
			s.dra.claims[u.key] = u.prev
		} else {
			delete(s.dra.claims, u.key)
		}
	}
	clear(s.dra.undo[m.undo:])
	s.dra.undo = s.dra.undo[:m.undo]
	clear(s.dra.slices[m.slices:])
	s.dra.slices = s.dra.slices[:m.slices]
	s.dra.stamp = m.stamp
}

// DRAStamp names the snapshot's DRA state: equal stamps, equal devices and
// claims.
func (s *Snapshot) DRAStamp() uint64 { return s.dra.stamp }

// simulatedDRA is the DRA manager the simulation's plugins read: the
// cluster's objects, as the scheduler's own manager serves them, with the
// current snapshot's changes on top. Plugins keep the manager they were built
// with, so this one follows the snapshot the framework is set to.
type simulatedDRA struct {
	live     fwk.SharedDRAManager
	snapshot *swappableSnapshot
}

func (m simulatedDRA) ResourceClaims() fwk.ResourceClaimTracker {
	return claimTracker{live: m.live.ResourceClaims(), snapshot: m.snapshot.current}
}

func (m simulatedDRA) ResourceSlices() fwk.ResourceSliceLister {
	return sliceLister{live: m.live.ResourceSlices(), snapshot: m.snapshot.current}
}

func (m simulatedDRA) DeviceClasses() fwk.DeviceClassLister { return m.live.DeviceClasses() }

func (m simulatedDRA) DeviceClassResolver() fwk.DeviceClassResolver {
	return m.live.DeviceClassResolver()
}

// sliceLister lists the cluster's slices and the simulated nodes'.
type sliceLister struct {
	live     fwk.ResourceSliceLister
	snapshot *Snapshot
}

func (l sliceLister) ListWithDeviceTaintRules() ([]*resourcev1.ResourceSlice, error) {
	slices, err := l.live.ListWithDeviceTaintRules()
	if err != nil || len(l.snapshot.dra.slices) == 0 {
		return slices, err
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(slices)+len(l.snapshot.dra.slices))
	return append(append(out, slices...), l.snapshot.dra.slices...), nil
}

// claimTracker serves the cluster's claims with the simulation's
// allocations on top. The DynamicResources plugin's Reserve hands it each
// allocation it makes (SignalClaimPendingAllocation): where the scheduler
// would write the allocation in PreBind, the simulation keeps it in the
// snapshot, so the claim reads as allocated from then on and its devices as
// taken. The binding phase never runs in the simulation.
type claimTracker struct {
	live     fwk.ResourceClaimTracker
	snapshot *Snapshot
}

func (t claimTracker) Get(namespace, name string) (*resourcev1.ResourceClaim, error) {
	if c, ok := t.snapshot.dra.claims[claimKey(namespace, name)]; ok {
		return c, nil
	}
	return t.live.Get(namespace, name)
}

func (t claimTracker) List() ([]*resourcev1.ResourceClaim, error) {
	claims, err := t.live.List()
	if err != nil || len(t.snapshot.dra.claims) == 0 {
		return claims, err
	}
	out := make([]*resourcev1.ResourceClaim, 0, len(claims)+len(t.snapshot.dra.claims))
	seen := make(sets.Set[string], len(t.snapshot.dra.claims))
	for _, c := range claims {
		key := claimKey(c.Namespace, c.Name)
		if sim, ok := t.snapshot.dra.claims[key]; ok {
			out = append(out, sim)
			seen.Insert(key)
			continue
		}
		out = append(out, c)
	}
	for key, sim := range t.snapshot.dra.claims {
		if !seen.Has(key) {
			out = append(out, sim)
		}
	}
	return out, nil
}

func (t claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	allocated, err := t.live.ListAllAllocatedDevices()
	if err != nil {
		// The plugin retries on the live tracker's concurrent
		// modification error, which it recognises through the wrap.
		return nil, fmt.Errorf("simulation: %w", err)
	}
	t.snapshot.simulatedDevices(false, func(id structured.DeviceID) { allocated.Insert(id) }, nil, nil)
	return allocated, nil
}

func (t claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	state, err := t.live.GatherAllocatedState()
	if err != nil {
		return nil, fmt.Errorf("simulation: %w", err)
	}
	t.snapshot.simulatedDevices(feature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
		func(id structured.DeviceID) { state.AllocatedDevices.Insert(id) },
		func(id structured.SharedDeviceID) { state.AllocatedSharedDeviceIDs.Insert(id) },
		func(c structured.DeviceConsumedCapacity) { state.AggregatedCapacity.Insert(c) })
	return state, nil
}

// simulatedDevices calls back with each device the simulation allocated, as
// the scheduler's tracker counts a claim's devices: a device with admin
// access is not taken; with consumable capacity, a shared device's share and
// the capacity it consumes; otherwise the device.
func (s *Snapshot) simulatedDevices(consumable bool, dedicated func(structured.DeviceID),
	shared func(structured.SharedDeviceID), consumed func(structured.DeviceConsumedCapacity)) {
	for _, claim := range s.dra.claims {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if consumable && r.ShareID != nil {
				shared(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					consumed(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			dedicated(id)
		}
	}
}

// SignalClaimPendingAllocation keeps the allocation the plugin's Reserve
// made in the snapshot.
func (t claimTracker) SignalClaimPendingAllocation(uid types.UID, allocated *resourcev1.ResourceClaim) error {
	if allocated == nil || allocated.Status.Allocation == nil {
		return errors.New("simulation: a claim signalled without an allocation")
	}
	if allocated.UID != uid {
		return fmt.Errorf("simulation: claim %s/%s has UID %s, signalled for %s", allocated.Namespace, allocated.Name, allocated.UID, uid)
	}
	key := claimKey(allocated.Namespace, allocated.Name)
	if _, err := t.Get(allocated.Namespace, allocated.Name); err != nil {
		key = inMemoryKey(allocated)
	}
	t.snapshot.setClaim(key, allocated)
	return nil
}

// GetPendingAllocation: the simulation's allocations are never pending, they
// read as made.
func (t claimTracker) GetPendingAllocation(types.UID) *resourcev1.AllocationResult { return nil }

// MaybeRemoveClaimPendingAllocation is for Unreserve, which the simulation
// does not run: a placement is undone by reverting the snapshot.
func (t claimTracker) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

// AssumeClaimAfterAPICall and AssumedClaimRestore belong to the binding phase,
// which the simulation does not run.
func (t claimTracker) AssumeClaimAfterAPICall(claim *resourcev1.ResourceClaim) error {
	return fmt.Errorf("simulation: claim %s/%s: the simulation binds no claim", claim.Namespace, claim.Name)
}

func (t claimTracker) AssumedClaimRestore(string, string) {}
