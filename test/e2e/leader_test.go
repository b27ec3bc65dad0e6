package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
	"github.com/quotascale/quotascale/cluster-autoscaler/app"
	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// TestLeaderLosesLeaseAndStandbyTakesOver runs two replicas through app.Main,
// the function the binary runs. Another identity takes the lease from the
// leader and then lets it go: the leader exits with ErrLostLease (a panic, as
// from registering metrics twice, would kill this test binary), and the standby
// leads, loops and is healthy on /health-check.
func TestLeaderLosesLeaseAndStandbyTakesOver(t *testing.T) {
	ctx := testContext(t)
	cloud := startKwokCloud(t, ctx, fourCPUGroup)
	lease := "e2e-leader-" + fmt.Sprint(time.Now().UnixNano()%100000)
	replica := func() (config.Options, string) {
		opts := config.Defaults()
		opts.CloudProviderName = kwok.ProviderName
		opts.CloudConfig = "configmap:kube-system/" + cloud.configName
		opts.KwokState = "kube-system/" + cloud.stateName
		opts.ScanInterval = 300 * time.Millisecond
		opts.LeaderElectResourceName = lease
		opts.LeaderElectLease, opts.LeaderElectRenew, opts.LeaderElectRetry = 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
		opts.MaxInactivity, opts.MaxFailingTime = 5*time.Second, 5*time.Second
		opts.VisibilityLogFile = filepath.Join(t.TempDir(), "visibility.log")
		opts.Address = freeAddress(t)
		return opts, opts.Address
	}
	// start runs a replica; its error is sent once on the returned channel.
	start := func(opts config.Options) <-chan error {
		runCtx, cancel := context.WithCancel(ctx)
		result, exited := make(chan error, 1), make(chan struct{})
		go func() {
			defer close(exited)
			result <- app.Main(runCtx, opts, cluster.Config)
		}()
		t.Cleanup(func() { cancel(); <-exited })
		return result
	}
	leaderOpts, leaderAddr := replica()
	leaderDone := start(leaderOpts)
	var leaderIdentity string
	waitFor(t, ctx, "the first replica leads", func(ctx context.Context) error {
		l, err := cluster.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		leaderIdentity = ptr.Deref(l.Spec.HolderIdentity, "")
		if leaderIdentity == "" {
			return errors.New("no holder yet")
		}
		return healthy(ctx, leaderAddr)
	})
	standbyOpts, standbyAddr := replica()
	standbyDone := start(standbyOpts)
	waitFor(t, ctx, "the standby serves a healthy /health-check", func(ctx context.Context) error {
		return healthy(ctx, standbyAddr)
	})

	// Another identity takes the lease, holding it well past the leader's renew
	// deadline.
	steal := func(holder string, duration int32) {
		t.Helper()
		l, err := cluster.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(duration),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)}
		if _, err := cluster.Client.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	steal("someone-else", 4)
	select {
	case err := <-leaderDone:
		if !errors.Is(err, app.ErrLostLease) {
			t.Fatalf("the leader that lost its lease returned %v, want ErrLostLease", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not stop after losing its lease")
	}
	// The other identity lets go: its lease expires without renewal. The
	// standby takes over, loops and is healthy.
	waitFor(t, ctx, "the standby leads", func(ctx context.Context) error {
		l, err := cluster.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h == "someone-else" || h == leaderIdentity || h == "" {
			return fmt.Errorf("held by %q", h)
		}
		return nil
	})
	waitFor(t, ctx, "the new leader has looped and is healthy", func(ctx context.Context) error {
		if err := healthy(ctx, standbyAddr); err != nil {
			return err
		}
		return metricAbove(ctx, standbyAddr, `cluster_autoscaler_last_activity{activity="main"}`, 0)
	})
	select {
	case err := <-standbyDone:
		t.Fatalf("the new leader stopped: %v", err)
	default:
	}
}

// TestStoppedLeaderHoldsTheLeaseUntilItsLoopEnds: a replica told to stop while
// its loop is still running (resizing a group, say) keeps renewing the lease
// until the loop has returned, and only then hands it on, so two replicas never
// act at once. Releasing the lease as soon as the stop was asked let the
// standby lead while the old loop still ran; a soak run caught both replicas
// adding a node for the same pods.
func TestStoppedLeaderHoldsTheLeaseUntilItsLoopEnds(t *testing.T) {
	ctx := testContext(t)
	lease := "e2e-leader-overlap-" + fmt.Sprint(time.Now().UnixNano()%100000)
	opts := config.Defaults()
	opts.LeaderElect = true
	opts.LeaderElectResourceName = lease
	opts.LeaderElectLease, opts.LeaderElectRenew, opts.LeaderElectRetry = 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond

	var active, overlaps atomic.Int32
	leadFor := func(name string, started, stopping chan<- struct{}, finish <-chan struct{}) func(context.Context) {
		return func(ctx context.Context) {
			if active.Add(1) > 1 {
				overlaps.Add(1)
				t.Errorf("%s leads while another replica's loop still runs", name)
			}
			defer active.Add(-1)
			if started != nil {
				close(started)
			}
			<-ctx.Done()
			if stopping != nil {
				close(stopping)
			}
			<-finish // the loop's last step, after it was told to stop
		}
	}
	holder := func(ctx context.Context) (string, time.Time, error) {
		l, err := cluster.Client.CoordinationV1().Leases(opts.Namespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return "", time.Time{}, err
		}
		var renewed time.Time
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), renewed, nil
	}

	firstCtx, stopFirst := context.WithCancel(ctx)
	firstStarted, firstStopping := make(chan struct{}), make(chan struct{})
	firstFinish, firstDone := make(chan struct{}), make(chan error, 1)
	finishFirst := sync.OnceFunc(func() { close(firstFinish) })
	firstExited := make(chan struct{})
	t.Cleanup(func() { stopFirst(); finishFirst(); <-firstExited })
	go func() {
		defer close(firstExited)
		firstDone <- app.RunWithLeaderElection(firstCtx, opts, cluster.Config, leadFor("first", firstStarted, firstStopping, firstFinish))
	}()
	select {
	case <-firstStarted:
	case <-ctx.Done():
		t.Fatal("the first replica never led")
	}
	first, _, err := holder(ctx)
	if err != nil || first == "" {
		t.Fatalf("the lease after the first replica started leading: holder %q, %v", first, err)
	}
	secondCtx, stopSecond := context.WithCancel(ctx)
	secondFinish, secondDone := make(chan struct{}), make(chan error, 1)
	close(secondFinish)
	go func() {
		secondDone <- app.RunWithLeaderElection(secondCtx, opts, cluster.Config, leadFor("second", nil, nil, secondFinish))
	}()
	t.Cleanup(func() { stopSecond(); <-secondDone })

	stopFirst()
	<-firstStopping
	stoppedAt := time.Now()
	// While its loop has not returned, the first replica goes on renewing
	// well past a lease duration, and nobody else takes the lease.
	waitFor(t, ctx, "the stopping leader renews its lease past a lease duration", func(ctx context.Context) error {
		h, renewed, err := holder(ctx)
		if err != nil {
			return err
		}
		if h != first {
			t.Fatalf("the lease passed to %q while the first replica's loop still ran", h)
		}
		if !renewed.After(stoppedAt.Add(2 * opts.LeaderElectLease)) {
			return fmt.Errorf("last renewed %s", renewed)
		}
		return nil
	})
	finishFirst()
	if err := <-firstDone; err != nil {
		t.Fatalf("the stopped leader returned %v, want nil", err)
	}
	waitFor(t, ctx, "the second replica leads", func(ctx context.Context) error {
		h, _, err := holder(ctx)
		if err != nil {
			return err
		}
		if h == "" || h == first {
			return fmt.Errorf("held by %q", h)
		}
		return nil
	})
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping leads", n)
	}
}

// TestAutoscalerBuiltTwiceInOneProcess: an autoscaler built again on the same
// process registers no collector a second time.
func TestAutoscalerBuiltTwiceInOneProcess(t *testing.T) {
	ctx := testContext(t)
	cloud := startKwokCloud(t, ctx, fourCPUGroup)
	opts := config.Defaults()
	opts.CloudProviderName = kwok.ProviderName
	opts.CloudConfig = "configmap:kube-system/" + cloud.configName
	opts.KwokState = "kube-system/" + cloud.stateName
	opts.VisibilityLogFile = filepath.Join(t.TempDir(), "visibility.log")
	process := app.NewProcess(opts)
	for i := 0; i < 2; i++ {
		runCtx, cancel := context.WithCancel(ctx)
		a, err := app.New(runCtx, opts, cluster.Config, process)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.RunOnce(runCtx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
}

func healthy(ctx context.Context, addr string) error {
	code, body, err := get(ctx, "http://"+addr+"/health-check")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/health-check: %d %s", code, body)
	}
	return nil
}

// metricAbove reads one sample, named with its labels as the text format
// writes it, from /metrics and requires it above min.
func metricAbove(ctx context.Context, addr, sample string, min float64) error {
	_, body, err := get(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return fmt.Errorf("%s: %w", line, err)
			}
			if v <= min {
				return fmt.Errorf("%s is %g, want above %g", sample, v, min)
			}
			return nil
		}
	}
	return fmt.Errorf("no sample %s on /metrics", sample)
}
