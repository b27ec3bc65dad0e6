package command

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// TestFlagsAreUpstreams: the command has exactly upstream kube-scheduler's
// flags, with their defaults and help.
func TestFlagsAreUpstreams(t *testing.T) {
	describe := func(fs *pflag.FlagSet) map[string]string {
		out := map[string]string{}
		fs.VisitAll(func(f *pflag.Flag) {
			out[f.Name] = f.Shorthand + "|" + f.Value.Type() + "|" + f.DefValue + "|" + f.Usage + "|" + f.Deprecated
		})
		return out
	}
	ours, upstream := describe(New().Flags()), describe(app.NewSchedulerCommand().Flags())
	for name, want := range upstream {
		if got, ok := ours[name]; !ok {
			t.Errorf("flag --%s is missing", name)
		} else if got != want {
			t.Errorf("flag --%s is %q, upstream's is %q", name, got, want)
		}
	}
	for name := range ours {
		if _, ok := upstream[name]; !ok {
			t.Errorf("flag --%s is not upstream's", name)
		}
	}
}

// TestObservedLockTellsWhetherThisReplicaLeads runs two client-go leader
// electors on one lease, as two kube-scheduler replicas: only the one holding
// the lease leads; when it releases the lease, the other one does.
func TestObservedLockTellsWhetherThisReplicaLeads(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	type replica struct {
		leadership *capacityscheduling.Leadership
		elector    *leaderelection.LeaderElector
		cancel     context.CancelFunc
		done       chan struct{}
	}
	start := func(identity string) *replica {
		t.Helper()
		r := &replica{leadership: &capacityscheduling.Leadership{}, done: make(chan struct{})}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		}
		var err error
		r.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          &observedLock{Interface: lock, leadership: r.leadership},
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 50 * time.Millisecond,
			ReleaseOnCancel: true,
			Name:            identity,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var runCtx context.Context
		runCtx, r.cancel = context.WithCancel(ctx)
		go func() {
			defer close(r.done)
			r.elector.Run(runCtx)
		}()
		t.Cleanup(func() { r.cancel(); <-r.done })
		return r
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
	}

	a := start("a")
	waitUntil("a leads", func() bool { return a.elector.IsLeader() && a.leadership.Leading() })
	b := start("b")
	waitUntil("b has seen a hold the lease", func() bool { return b.elector.GetLeader() == "a" })
	if b.leadership.Leading() {
		t.Fatal("b leads while a holds the lease")
	}

	a.cancel()
	<-a.done
	if a.leadership.Leading() {
		t.Error("a still leads after releasing the lease")
	}
	waitUntil("b leads", func() bool { return b.elector.IsLeader() && b.leadership.Leading() })
}
