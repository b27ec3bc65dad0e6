package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/klog/v2"
)

// Serve serves /metrics and /health-check, and /debug/pprof with
// --profiling, on addr until ctx ends, as upstream's binary does. It returns
// the address it listens on, useful when addr has port 0.
func (p *Process) Serve(ctx context.Context, addr string) (string, error) {
	mux := mux.NewPathRecorderMux(Component)
	mux.Handle("/metrics", promhttp.HandlerFor(p.Metrics.Registry, promhttp.HandlerOpts{}))
	mux.Handle("/health-check", p.health)
	if p.profiling {
		routes.Profiling{}.Install(mux)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Serving metrics and health")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return l.Addr().String(), nil
}
