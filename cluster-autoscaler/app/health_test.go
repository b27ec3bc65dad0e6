package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestHealthCheck follows upstream's rules: healthy until leading starts; then
// unhealthy once the last loop is older than --max-inactivity or the last
// successful one older than --max-failing-time.
func TestHealthCheck(t *testing.T) {
	start := time.Unix(1000, 0)
	failed := errors.New("loop failed")
	for _, tc := range []struct {
		name  string
		steps func(h *health, clock *time.Time)
		want  int
	}{
		{"standby, long after start", func(h *health, c *time.Time) { *c = c.Add(time.Hour) }, http.StatusOK},
		{"leading, no loop yet, within both bounds", func(h *health, c *time.Time) {
			h.startMonitoring()
			*c = c.Add(4 * time.Minute)
		}, http.StatusOK},
		{"leading, no loop for longer than --max-inactivity", func(h *health, c *time.Time) {
			h.startMonitoring()
			*c = c.Add(11 * time.Minute)
		}, http.StatusInternalServerError},
		{"leading, loops failing for longer than --max-failing-time", func(h *health, c *time.Time) {
			h.startMonitoring()
			for i := 0; i < 16; i++ {
				*c = c.Add(time.Minute)
				h.observe(*c, failed)
			}
		}, http.StatusInternalServerError},
		{"leading, loops failing for less than --max-failing-time", func(h *health, c *time.Time) {
			h.startMonitoring()
			for i := 0; i < 14; i++ {
				*c = c.Add(time.Minute)
				h.observe(*c, failed)
			}
		}, http.StatusOK},
		{"leading, a success resets both", func(h *health, c *time.Time) {
			h.startMonitoring()
			*c = c.Add(9 * time.Minute)
			h.observe(*c, nil)
			*c = c.Add(9 * time.Minute)
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := start
			h := newHealth(10*time.Minute, 15*time.Minute)
			h.now = func() time.Time { return clock }
			tc.steps(h, &clock)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health-check", nil))
			if rec.Code != tc.want {
				t.Errorf("status %d (%s), want %d", rec.Code, rec.Body.String(), tc.want)
			}
		})
	}
}
