package core

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotascale/quotascale/cloudprovider"
	"github.com/quotascale/quotascale/cluster-autoscaler/clusterstate"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// TestFixNodeGroupSizes: a target that runs ahead of the group's instances
// for longer than --max-node-provision-time is lowered by the difference, as
// upstream's fixNodeGroupSize; the clock starts over when the target or the
// instances change, and a group whose instances catch up is left alone.
func TestFixNodeGroupSizes(t *testing.T) {
	creating := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	deleting := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	stuck := &fakeGroup{id: "stuck", max: 10, target: 4, instances: []cloudprovider.Instance{
		{Id: "fake://stuck/0", Status: creating}, {Id: "fake://stuck/1", Status: deleting},
	}}
	moving := &fakeGroup{id: "moving", max: 10, target: 3, instances: []cloudprovider.Instance{{Id: "fake://moving/0", Status: creating}}}
	full := &fakeGroup{id: "full", max: 10, target: 1, instances: []cloudprovider.Instance{{Id: "fake://full/0", Status: creating}}}
	provider := &fakeProvider{groups: []*fakeGroup{full, moving, stuck}}
	opts := config.Defaults()
	opts.MaxNodeProvisionTime = time.Minute
	a := &Autoscaler{opts: opts, registry: clusterstate.NewRegistry(clusterstate.Options{MaxNodeProvisionTime: time.Minute})}
	ctx := context.Background()
	start := time.Unix(1000, 0)

	loop := func(at time.Duration) bool {
		t.Helper()
		state, err := a.registry.Update(ctx, provider, nil, start.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		fixed, err := a.fixNodeGroupSizes(ctx, state, start.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		return fixed
	}
	if loop(0) {
		t.Fatal("a target was lowered at once")
	}
	// moving gets a second instance: its clock starts over.
	moving.instances = append(moving.instances, cloudprovider.Instance{Id: "fake://moving/1", Status: creating})
	if loop(40 * time.Second) {
		t.Fatal("a target was lowered before --max-node-provision-time")
	}
	if !loop(61 * time.Second) {
		t.Fatal("no target lowered after --max-node-provision-time")
	}
	// The deleting instance does not count: stuck keeps its one live instance.
	want := map[string][]int{"full": nil, "moving": nil, "stuck": {-3}}
	got := map[string][]int{}
	for _, g := range provider.groups {
		got[g.id] = g.decreases
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decreases (-want +got):\n%s", diff)
	}
	if !loop(101 * time.Second) {
		t.Fatal("moving was not lowered a minute after its instances last changed")
	}
	if diff := cmp.Diff([]int{-1}, moving.decreases); diff != "" {
		t.Errorf("moving's decreases (-want +got):\n%s", diff)
	}
	if loop(200 * time.Second) {
		t.Error("a target was lowered again once it met its instances")
	}
}
