package app

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// health answers /health-check as upstream's health check does: a replica that
// is not leading is healthy; the lease holder is unhealthy once no loop has run
// for --max-inactivity or no loop has succeeded for --max-failing-time, so that
// the kubelet restarts a wedged autoscaler.
type health struct {
	mu              sync.Mutex
	activityTimeout time.Duration
	successTimeout  time.Duration
	monitoring      bool
	lastActivity    time.Time
	lastSuccess     time.Time
	lastErr         error
	now             func() time.Time
}

func newHealth(activityTimeout, successTimeout time.Duration) *health {
	return &health{activityTimeout: activityTimeout, successTimeout: successTimeout, now: time.Now}
}

// startMonitoring is called when this replica starts leading: both clocks start
// then, not at process start, so that a standby that takes over late is not
// unhealthy at once.
func (h *health) startMonitoring() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.monitoring = true
	now := h.now()
	h.lastActivity, h.lastSuccess = now, now
}

// observe records a finished loop: any loop is activity, one without error is
// also a success.
func (h *health) observe(at time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err
	if at.After(h.lastActivity) {
		h.lastActivity = at
	}
	if err == nil && at.After(h.lastSuccess) {
		h.lastSuccess = at
	}
}

func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.monitoring {
		fmt.Fprintln(w, "OK (not leading)")
		return
	}
	now := h.now()
	sinceActivity, sinceSuccess := now.Sub(h.lastActivity), now.Sub(h.lastSuccess)
	if sinceActivity > h.activityTimeout || sinceSuccess > h.successTimeout {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "last loop %s ago (--max-inactivity %s), last successful loop %s ago (--max-failing-time %s), last error: %v\n",
			sinceActivity.Round(time.Second), h.activityTimeout, sinceSuccess.Round(time.Second), h.successTimeout, h.lastErr)
		return
	}
	fmt.Fprintln(w, "OK")
}
