package clusterstate

import (
	"time"

	"github.com/quotascale/quotascale/cloudprovider"
)

// BackoffOptions are upstream's --initial-node-group-backoff-duration,
// --max-node-group-backoff-duration and --node-group-backoff-reset-timeout.
type BackoffOptions struct {
	Initial time.Duration
	Max     time.Duration
	Reset   time.Duration
}

// backoff is one node group's exponential backoff after failed scale-ups.
type backoff struct {
	duration    time.Duration
	until       time.Time
	lastFailure time.Time
	errorInfo   cloudprovider.InstanceErrorInfo
}

// fail starts or lengthens the backoff: doubling from Initial up to Max, back to
// Initial after Reset without failures.
func (b *backoff) fail(opts BackoffOptions, info cloudprovider.InstanceErrorInfo, now time.Time) {
	switch {
	case b.duration == 0 || now.Sub(b.lastFailure) > opts.Reset:
		b.duration = opts.Initial
	default:
		b.duration = min(2*b.duration, opts.Max)
	}
	b.until = now.Add(b.duration)
	b.lastFailure = now
	b.errorInfo = info
}

func (b *backoff) active(now time.Time) bool { return b != nil && now.Before(b.until) }
