package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamidx/streamidx/internal/httptls"
	"github.com/streamidx/streamidx/internal/procs"
	"github.com/streamidx/streamidx/serve"
)

func init() {
	register(command{name: "serve", summary: "answer lookups over HTTP (the lookup service alone, without updating indexes)", run: runServe})
}

func runServe(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	httpAddr := fs.String("http", "", "listen `address` of the lookup service, /metrics, /healthz and /readyz (default from serve.http: 127.0.0.1:9465)")
	var warm stringList
	fs.Var(&warm, "warm", "read the pages of index `NS.TABLE/INDEX` into the cache at start, before /readyz says ready (repeat; see serve.warm)")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	type target struct{ table, index string }
	var targets []target
	for _, w := range warm {
		t, i, ok := strings.Cut(w, "/")
		if !ok || t == "" || i == "" {
			return exitError, fmt.Errorf("--warm %q: want NS.TABLE/INDEX", w)
		}
		targets = append(targets, target{t, i})
	}
	g.serving = true
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	limitMemory(int64(e.cfg.Serve.CacheBytes))
	reserveForServing(e.log)
	addr := e.cfg.Serve.HTTP
	if *httpAddr != "" {
		addr = *httpAddr
	}
	reg := newRegistry()
	svc, err := newService(e, reg)
	if err != nil {
		return exitError, err
	}
	defer svc.Close()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	var ready atomic.Bool
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready: warming the lookup cache", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("/v1/", svc.Handler())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return exitError, fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: httptls.ErrorLog(e.log)}
	if e.cfg.Serve.TLSCertFile != "" {
		if srv.TLSConfig, err = httptls.Config(e.cfg.Serve.TLSCertFile, e.cfg.Serve.TLSKeyFile, e.log); err != nil {
			ln.Close()
			return exitError, err
		}
	}
	warnIfExposed(e, addr)
	done := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			done <- srv.ServeTLS(ln, "", "")
			return
		}
		done <- srv.Serve(ln)
	}()
	e.log.Info("streamidx serve started", "http", ln.Addr().String(), "token", e.cfg.Serve.Token != "", "tls", srv.TLSConfig != nil)
	if e.cfg.Serve.Warm {
		budget := svc.WarmBudget(len(targets))
		for _, t := range targets {
			if err := warmIndex(ctx, e, svc, t.table, t.index, budget); err != nil && ctx.Err() == nil {
				e.log.Warn("warming the lookup cache failed: the first lookups read what they need", "table", t.table, "index", t.index, "err", err)
			}
		}
	}
	ready.Store(true)
	if err := serveUntilDone(ctx, srv, done); err != nil {
		return exitError, err
	}
	fmt.Fprintln(stdout, "streamidx serve: stopped")
	return exitOK, nil
}

// serveUntilDone waits until srv's Serve, whose result done receives, ends
// (its error returned) or ctx does; then it shuts srv down, giving the
// requests being answered 5 s, and returns nil once Serve has returned.
func serveUntilDone(ctx context.Context, srv *http.Server, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Connections a client opened and never used keep Shutdown
		// waiting: close them.
		_ = srv.Close()
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// warmIndex warms the lookup cache with index index of table table, up to
// budget bytes, and logs what it read.
func warmIndex(ctx context.Context, e *env, svc *serve.Service, table, index string, budget int64) error {
	began := time.Now()
	w, err := svc.Warm(ctx, table, index, budget)
	if err != nil {
		return err
	}
	e.log.Info("lookup cache warmed", "table", table, "index", index, "range_files", w.Files, "of", w.Of,
		"bytes", w.Bytes, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// newService builds the lookup service of the environment's catalogs and
// store, with the serve section's limits and token.
func newService(e *env, reg prometheus.Registerer) (*serve.Service, error) {
	opts := serve.OptionsFromConfig(e.cfg.Serve)
	opts.Tables, opts.Indexes, opts.Store, opts.Logger, opts.Registerer = e.cat, e.indexes, e.store, e.log, reg
	return serve.New(opts)
}

// warnIfExposed logs a warning when the service answers beyond this host
// without a token, or with one over plain HTTP, where it crosses the
// network in clear.
func warnIfExposed(e *env, addr string) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return
	}
	switch {
	case e.cfg.Serve.Token == "":
		e.log.Warn("the lookup service answers other hosts without a token: set serve.token or STREAMIDX_SERVE_TOKEN", "http", addr)
	case e.cfg.Serve.TLSCertFile == "":
		e.log.Warn("the lookup service's token crosses the network in clear over plain HTTP: set serve.tls-cert-file and serve.tls-key-file", "http", addr)
	}
}

// newRegistry returns the registry of a long-running command: Go and
// process metrics besides streamidx's own, the Go runtime's scheduler
// histograms included (go_sched_latencies_seconds, the time runnable
// goroutines waited for a core, and go_sched_pauses_total_gc_seconds, the
// collector's stop-the-world pauses), which tell a lookup service's tail
// latency from its own work.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// reserveForServing gives the lookups of this process Ps of their own, so
// that they need not wait for the goroutines of updates and background
// reconciliations (see internal/procs), and says so.
func reserveForServing(log *slog.Logger) {
	if before, after := procs.ReserveForServing(); after != before {
		log.Info("GOMAXPROCS raised so that lookups need not wait for the goroutines of updates (set GOMAXPROCS to choose)",
			"gomaxprocs", after, "work", before)
	}
}
