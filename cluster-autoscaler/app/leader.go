package app

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/quotascale/quotascale/cluster-autoscaler/config"
)

// RunWithLeaderElection runs lead (building and looping the autoscaler) only
// while this replica holds the --leader-elect-resource-name lease, as
// upstream's --leader-elect does. Losing the lease cancels lead's context; it then waits to
// lead again, so a replica that lost the lease can take over later.
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
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, opts.LeaderElectResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return fmt.Errorf("leader lock: %w", err)
	}
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   opts.LeaderElectLease,
			RenewDeadline:   opts.LeaderElectRenew,
			RetryPeriod:     opts.LeaderElectRetry,
			ReleaseOnCancel: true,
			Name:            Component,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: lead,
				OnStoppedLeading: func() { logger.Info("Lost the leader lease") },
				OnNewLeader: func(identity string) {
					logger.V(2).Info("Leader", "identity", identity)
				},
			},
		})
	}
	return nil
}
