package app

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// health answers /health-check: unhealthy when the leader has not completed a
// loop for a while, as upstream's health check does, so a wedged autoscaler gets
// restarted. A standby replica is healthy.
type health struct {
	mu          sync.Mutex
	isLeader    bool
	interval    time.Duration
	started     time.Time
	lastSuccess time.Time
	lastErr     error
}

func newHealth(interval time.Duration) *health {
	return &health{interval: interval, started: time.Now()}
}

func (h *health) leading(l bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.isLeader = l
	h.started = time.Now()
	h.lastSuccess = time.Time{}
}

func (h *health) observe(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err
	if err == nil {
		h.lastSuccess = now
	}
}

// ServeHTTP fails when neither a start nor a success happened within ten scan
// intervals (at least five minutes).
func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isLeader {
		fmt.Fprintln(w, "OK (standby)")
		return
	}
	window := max(10*h.interval, 5*time.Minute)
	last := h.lastSuccess
	if last.IsZero() {
		last = h.started
	}
	if since := time.Since(last); since > window {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "no successful loop for %s (last error: %v)\n", since.Round(time.Second), h.lastErr)
		return
	}
	fmt.Fprintln(w, "OK")
}
