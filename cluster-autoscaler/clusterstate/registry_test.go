package clusterstate

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotascale/quotascale/cloudprovider"
)

type fakeGroup struct {
	cloudprovider.NodeGroup
	id        string
	target    int
	instances []cloudprovider.Instance
}

func (g *fakeGroup) Id() string                               { return g.id }
func (g *fakeGroup) MinSize() int                             { return 0 }
func (g *fakeGroup) MaxSize() int                             { return 10 }
func (g *fakeGroup) Exist() bool                              { return true }
func (g *fakeGroup) TargetSize() (int, error)                 { return g.target, nil }
func (g *fakeGroup) Nodes() ([]cloudprovider.Instance, error) { return g.instances, nil }

type fakeProvider struct {
	cloudprovider.CloudProvider
	groups []cloudprovider.NodeGroup
}

func (p *fakeProvider) NodeGroups() []cloudprovider.NodeGroup { return p.groups }

func instance(id string, state cloudprovider.InstanceState, failed bool) cloudprovider.Instance {
	in := cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{State: state}}
	if failed {
		in.Status.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT"}
	}
	return in
}

func readyNode(providerID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: providerID},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// TestUpcoming: a group's upcoming nodes are its target minus its registered
// nodes, and at least its instances without a node; the ones that may still
// register leave out the failed and late instances.
func TestUpcoming(t *testing.T) {
	creating := cloudprovider.InstanceCreating
	for _, tc := range []struct {
		name                   string
		target                 int
		instances              []cloudprovider.Instance
		nodes                  []*corev1.Node
		wantUpcoming, wantProv int
	}{
		{name: "replicas asked for, no instance yet", target: 4, wantUpcoming: 4, wantProv: 4},
		{name: "some registered, one creating, one not started",
			target:       4,
			instances:    []cloudprovider.Instance{instance("a", cloudprovider.InstanceRunning, false), instance("b", cloudprovider.InstanceRunning, false), instance("c", creating, false)},
			nodes:        []*corev1.Node{readyNode("a"), readyNode("b")},
			wantUpcoming: 2, wantProv: 2},
		{name: "a failed instance holds its place while the target counts it",
			target:       2,
			instances:    []cloudprovider.Instance{instance("a", creating, true), instance("b", creating, false)},
			wantUpcoming: 2, wantProv: 1},
		{name: "instances outlive a lowered target",
			target:       1,
			instances:    []cloudprovider.Instance{instance("a", creating, true), instance("b", creating, false), instance("c", creating, false)},
			wantUpcoming: 3, wantProv: 2},
		{name: "deleting instances count nothing",
			target:       0,
			instances:    []cloudprovider.Instance{instance("a", cloudprovider.InstanceDeleting, false)},
			wantUpcoming: 0, wantProv: 0},
		{name: "more registered than the target",
			target:       1,
			instances:    []cloudprovider.Instance{instance("a", cloudprovider.InstanceRunning, false), instance("b", cloudprovider.InstanceRunning, false)},
			nodes:        []*corev1.Node{readyNode("a"), readyNode("b")},
			wantUpcoming: 0, wantProv: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(Options{MaxNodeProvisionTime: time.Hour, Backoff: BackoffOptions{Initial: time.Minute, Max: time.Hour, Reset: time.Hour}})
			g := &fakeGroup{id: "g", target: tc.target, instances: tc.instances}
			state, err := r.Update(context.Background(), &fakeProvider{groups: []cloudprovider.NodeGroup{g}}, tc.nodes, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			gs := state.Group("g")
			if diff := cmp.Diff([2]int{tc.wantUpcoming, tc.wantProv}, [2]int{gs.Upcoming, gs.Provisioning()}); diff != "" {
				t.Errorf("[upcoming, provisioning] (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLateInstances: an instance without a node past --max-node-provision-time
// is late, backs its group off once, and still counts as upcoming.
func TestLateInstances(t *testing.T) {
	r := NewRegistry(Options{MaxNodeProvisionTime: time.Minute, Backoff: BackoffOptions{Initial: time.Minute, Max: time.Hour, Reset: time.Hour}})
	g := &fakeGroup{id: "g", target: 1, instances: []cloudprovider.Instance{instance("a", cloudprovider.InstanceCreating, false)}}
	p := &fakeProvider{groups: []cloudprovider.NodeGroup{g}}
	start := time.Unix(0, 0)
	for _, step := range []struct {
		at                time.Duration
		late, backedOff   bool
		upcoming, waiting int
	}{
		{at: 0, upcoming: 1, waiting: 1},
		{at: 30 * time.Second, upcoming: 1, waiting: 1},
		{at: 61 * time.Second, late: true, backedOff: true, upcoming: 1, waiting: 0},
		{at: 125 * time.Second, late: true, backedOff: false, upcoming: 1, waiting: 0},
	} {
		now := start.Add(step.at)
		state, err := r.Update(context.Background(), p, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		gs := state.Group("g")
		backedOff, _ := r.BackedOff("g", now)
		got := []any{len(gs.Late) == 1, backedOff, gs.Upcoming, gs.Provisioning()}
		if diff := cmp.Diff([]any{step.late, step.backedOff, step.upcoming, step.waiting}, got); diff != "" {
			t.Errorf("at %s [late, backed off, upcoming, provisioning] (-want +got):\n%s", step.at, diff)
		}
	}
}

// TestScaleUpTimeout: replicas asked for that never become instances (a
// MachineSet that cannot create Machines) fail the scale-up once
// --max-node-provision-time has passed, as upstream's scale-up requests time
// out; a request met in time, or already failed by an instance, does not.
func TestScaleUpTimeout(t *testing.T) {
	start := time.Unix(0, 0)
	for _, tc := range []struct {
		name          string
		instances     []cloudprovider.Instance
		nodes         []*corev1.Node
		wantBackedOff bool
	}{
		{name: "no instance ever appeared", wantBackedOff: true},
		{name: "the nodes registered",
			instances: []cloudprovider.Instance{instance("a", cloudprovider.InstanceRunning, false), instance("b", cloudprovider.InstanceRunning, false)},
			nodes:     []*corev1.Node{readyNode("a"), readyNode("b")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(Options{MaxNodeProvisionTime: time.Minute, Backoff: BackoffOptions{Initial: time.Minute, Max: time.Hour, Reset: time.Hour}})
			g := &fakeGroup{id: "g", target: 2}
			p := &fakeProvider{groups: []cloudprovider.NodeGroup{g}}
			r.RegisterScaleUp("g", 2, 2, start)
			if _, err := r.Update(context.Background(), p, nil, start.Add(30*time.Second)); err != nil {
				t.Fatal(err)
			}
			g.instances = tc.instances
			at := start.Add(61 * time.Second)
			state, err := r.Update(context.Background(), p, tc.nodes, at)
			if err != nil {
				t.Fatal(err)
			}
			backedOff, info := r.BackedOff("g", at)
			if backedOff != tc.wantBackedOff {
				t.Errorf("backed off %v (%+v), want %v", backedOff, info, tc.wantBackedOff)
			}
			if backedOff && info.ErrorCode != "timeout" {
				t.Errorf("error %+v, want the timeout", info)
			}
			if tc.wantBackedOff && state.Group("g").Upcoming != 2 {
				t.Errorf("a timed-out scale-up's replicas still count as upcoming: got %d, want 2", state.Group("g").Upcoming)
			}
		})
	}
	t.Run("a failed instance backs off once", func(t *testing.T) {
		r := NewRegistry(Options{MaxNodeProvisionTime: time.Minute, Backoff: BackoffOptions{Initial: time.Minute, Max: time.Hour, Reset: time.Hour}})
		g := &fakeGroup{id: "g", target: 1, instances: []cloudprovider.Instance{instance("a", cloudprovider.InstanceCreating, true)}}
		p := &fakeProvider{groups: []cloudprovider.NodeGroup{g}}
		r.RegisterScaleUp("g", 1, 1, start)
		for _, at := range []time.Duration{10 * time.Second, 70 * time.Second, 130 * time.Second} {
			if _, err := r.Update(context.Background(), p, nil, start.Add(at)); err != nil {
				t.Fatal(err)
			}
		}
		// One failure at 10s: a 1 minute backoff, over at 70s; a second
		// failure (the timeout) would have doubled it past 130s.
		if backedOff, info := r.BackedOff("g", start.Add(130*time.Second)); backedOff {
			t.Errorf("still backed off at 130s: %+v", info)
		}
	})
}
