package command

import (
	"context"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/quotascale/quotascale/scheduler/capacityscheduling"
)

// observedLock is kube-scheduler's leader election lock, telling the plugin
// whether this replica leads. The elector leads from the moment a write of
// the lease naming this replica as holder succeeds (acquiring or renewing,
// coordinated or not) and stops leading when it writes the lease away
// (releasing it on shutdown); a replica that loses the lease otherwise exits.
type observedLock struct {
	resourcelock.Interface
	leadership *capacityscheduling.Leadership
}

func (l *observedLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.Interface.Create(ctx, record); err != nil {
		return err
	}
	l.wrote(record)
	return nil
}

func (l *observedLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.Interface.Update(ctx, record); err != nil {
		return err
	}
	l.wrote(record)
	return nil
}

func (l *observedLock) wrote(record resourcelock.LeaderElectionRecord) {
	l.leadership.SetLeading(record.HolderIdentity == l.Identity())
}
