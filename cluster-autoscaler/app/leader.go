package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

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
	// client-go starts OnStartedLeading in a goroutine and does not wait for it.
	// Leading ends only once lead has returned, so that no loop of this replica
	// overlaps the next leader's; a callback that starts after RunOrDie returned
	// does not lead at all.
	var (
		mu       sync.Mutex
		led      bool
		finished bool
		leadDone = make(chan struct{})
	)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaderElectLease,
		RenewDeadline:   opts.LeaderElectRenew,
		RetryPeriod:     opts.LeaderElectRetry,
		ReleaseOnCancel: true,
		Name:            Component,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				mu.Lock()
				if finished {
					mu.Unlock()
					return
				}
				led = true
				mu.Unlock()
				defer close(leadDone)
				lead(ctx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				logger.V(2).Info("Leader", "identity", id, "self", id == identity)
			},
		},
	})
	// RunOrDie returns once it stops leading, or when ctx ends before it led.
	mu.Lock()
	finished = true
	wasLeading := led
	mu.Unlock()
	if wasLeading {
		<-leadDone
	}
	if ctx.Err() != nil {
		return nil
	}
	if wasLeading {
		logger.Error(ErrLostLease, "Stopping", "lease", opts.Namespace+"/"+opts.LeaderElectResourceName, "identity", identity)
	}
	return fmt.Errorf("%w %s/%s", ErrLostLease, opts.Namespace, opts.LeaderElectResourceName)
}
