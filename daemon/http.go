package daemon

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamidx/streamidx/internal/httptls"
)

// handler serves /metrics (when the registerer can also gather), /healthz
// (the process is up) and /readyz (every index caught up once and, with a
// WarmFunc, warmed; none halted).
func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	if g, ok := d.reg.(prometheus.Gatherer); ok {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: d.reg}))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if msg := d.notReady(); msg != "" {
			http.Error(w, "not ready: "+msg, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	for _, m := range d.mounts {
		mux.Handle(m.pattern, m.h)
	}
	return mux
}

// notReady says why the daemon is not ready, or "" when it is.
func (d *Daemon) notReady() string {
	var halted, behind, cold []string
	for _, w := range d.workers {
		switch err := w.halted(); {
		case err != nil:
			halted = append(halted, fmt.Sprintf("index %s halted: %v", w.name(), err))
		case !w.synced.Load():
			behind = append(behind, w.name())
		case !w.warmed.Load():
			cold = append(cold, w.name())
		}
	}
	switch {
	case len(halted) > 0:
		return strings.Join(halted, "; ")
	case len(behind) > 0:
		return "indexes catching up: " + strings.Join(behind, ", ")
	case len(cold) > 0:
		return "warming the lookup cache: " + strings.Join(cold, ", ")
	}
	return ""
}

func (d *Daemon) httpServer() *http.Server {
	return &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: httptls.ErrorLog(d.log)}
}
