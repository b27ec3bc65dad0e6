package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// ErrLostLease is returned when this replica stopped holding the leader lease
// while it was not asked to stop. As upstream, the process then exits non-zero
// rather than trying to lead again: the state built while leading (informers,
// the cloud provider, backoffs) would be stale, and a restart gives the replica a
// clean start as a standby while another one leads.
var ErrLostLease = errors.New("lost the leader lease")

// Main is what the cluster-autoscaler binary runs once its flags are parsed:
// serve metrics and the health check for the life of the process, then build and
// loop the autoscaler while this replica leads. It returns when ctx ends (nil),
// when the autoscaler cannot be built, or with ErrLostLease.
func Main(ctx context.Context, opts config.Options, restConfig *restclient.Config) error {
	process := NewProcess(opts)
	if _, err := process.Serve(ctx, opts.Address); err != nil {
		return err
	}
	return process.Run(ctx, opts, restConfig)
}

// Run builds and loops the autoscaler while this replica leads; see Main.
func (p *Process) Run(ctx context.Context, opts config.Options, restConfig *restclient.Config) error {
	leadCtx, stopLeading := context.WithCancel(ctx)
	defer stopLeading()
	var buildErr error
	err := RunWithLeaderElection(leadCtx, opts, restConfig, func(ctx context.Context) {
		a, err := New(ctx, opts, restConfig, p)
		if err != nil && ctx.Err() != nil {
			// The lease was lost (or the process is stopping) while the
			// autoscaler was being built: that is how this ends, not the
			// build's error.
			klog.FromContext(ctx).Info("Stopped leading before the autoscaler started", "err", err)
			return
		}
		if err != nil {
			buildErr = err
			stopLeading()
			return
		}
		a.Run(ctx)
	})
	if buildErr != nil {
		return buildErr
	}
	return err
}

// RunWithLeaderElection runs lead (building and looping the autoscaler) only
// while this replica holds the --leader-elect-resource-name lease, as
// upstream's --leader-elect does. Losing the lease cancels lead's context and
// returns ErrLostLease; ctx ending releases the lease and returns nil.
//
// Two replicas must never actuate at once: a loop that is resizing a group
// when its replica is told to stop would otherwise overlap the next leader's,
// and both would add nodes for the same pods. So the lease is renewed until
// lead has returned, not only until ctx ends, and it is released only then.
// client-go's ReleaseOnCancel would release it as soon as renewing stops,
// also when a renewal timed out while lead is still running.
func RunWithLeaderElection(ctx context.Context, opts config.Options, restConfig *restclient.Config, lead func(ctx context.Context)) error {
	if !opts.LeaderElect {
		lead(ctx)
		return nil
	}
	client, err := kubernetes.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(restConfig), Component+"-leader-election"))
	if err != nil {
		return fmt.Errorf("leader election client: %w", err)
	}
	host, _ := os.Hostname()
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, opts.LeaderElectResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("leader lock: %w", err)
	}
	logger := klog.FromContext(ctx)
	lease := opts.Namespace + "/" + opts.LeaderElectResourceName

	// The election runs on its own context: it ends when lead has returned,
	// or when ctx ends before this replica led.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var (
		mu       sync.Mutex
		led      bool // lead was started
		finished bool // no lead may start any more
		leadDone = make(chan struct{})
	)
	stopWaiting := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !led {
			finished = true
			stopElection()
		}
	})
	defer stopWaiting()
	leaderelection.RunOrDie(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: opts.LeaderElectLease,
		RenewDeadline: opts.LeaderElectRenew,
		RetryPeriod:   opts.LeaderElectRetry,
		Name:          Component,
		Callbacks: leaderelection.LeaderCallbacks{
			// client-go starts this in a goroutine and does not wait for it.
			OnStartedLeading: func(leaseCtx context.Context) {
				mu.Lock()
				if finished {
					mu.Unlock()
					return
				}
				led = true
				mu.Unlock()
				defer close(leadDone)
				defer stopElection()
				leadCtx, cancel := context.WithCancel(leaseCtx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				lead(leadCtx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				logger.V(2).Info("Leader", "identity", id, "self", id == identity)
			},
		},
	})
	// RunOrDie returns once renewing stopped: lead returned, ctx ended before
	// this replica led, or the lease was lost (lead may still be stopping).
	mu.Lock()
	finished = true
	wasLeading := led
	mu.Unlock()
	if !wasLeading {
		return ctxOrLost(ctx, lease)
	}
	<-leadDone
	releaseLease(ctx, lock, identity, opts.LeaderElectRenew)
	if ctx.Err() != nil {
		return nil
	}
	logger.Error(ErrLostLease, "Stopping", "lease", lease, "identity", identity)
	return fmt.Errorf("%w %s", ErrLostLease, lease)
}

func ctxOrLost(ctx context.Context, lease string) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%w %s", ErrLostLease, lease)
}

// releaseLease hands the lease on at once, as client-go's release does, if
// this replica still holds it; lead has returned, so the next leader cannot
// overlap it. A lease another replica took meanwhile is left alone: the
// update carries the resource version read here.
func releaseLease(ctx context.Context, lock resourcelock.Interface, identity string, timeout time.Duration) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	record, _, err := lock.Get(ctx)
	if err != nil {
		logger.Error(err, "Reading the leader lease to release it", "lease", lock.Describe())
		return
	}
	if record.HolderIdentity != identity {
		return
	}
	now := metav1.NewTime(time.Now())
	released := resourcelock.LeaderElectionRecord{
		LeaderTransitions:    record.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}
	if err := lock.Update(ctx, released); err != nil {
		logger.Error(err, "Releasing the leader lease", "lease", lock.Describe())
	}
}
