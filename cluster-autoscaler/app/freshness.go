package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
)

// freshness tells whether the autoscaler may act on what its informers hold.
// During an API server outage the caches stop moving while pods and nodes change
// underneath; acting on them could buy nodes for pods that are gone, or past a
// quota whose nodes it no longer sees. So the loop keeps running but scales
// nothing once the API server has been unreachable for longer than the bound,
// and after an outage it waits one loop for the informers to re-list.
type freshness struct {
	client    kubernetes.Interface
	bound     time.Duration
	lastFresh time.Time
	// recovering is set when the API server answers again after an outage.
	recovering bool
}

// check probes the API server and reports whether the loop may act, and why not.
func (f *freshness) check(ctx context.Context, now time.Time) (bool, string) {
	probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := f.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(probeCtx).Error()
	if f.lastFresh.IsZero() {
		f.lastFresh = now
	}
	if err != nil {
		if stale := now.Sub(f.lastFresh); stale > f.bound {
			f.recovering = true
			return false, fmt.Sprintf("the API server has been unreachable for %s, longer than --max-stale-data %s: %v", stale.Round(time.Second), f.bound, err)
		}
		return true, ""
	}
	f.lastFresh = now
	if f.recovering {
		f.recovering = false
		return false, "the API server is back; waiting one loop for the informers to re-list"
	}
	return true, ""
}
