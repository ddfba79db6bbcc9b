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
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

func init() {
	register(command{name: "run", summary: "the daemon: keep indexes aligned with their tables as commits arrive", run: runDaemon})
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runDaemon(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	var tables, indexes stringList
	fs.Var(&tables, "table", "source table `NS.TABLE` (repeat, paired with --index)")
	fs.Var(&indexes, "index", "index `name` (repeat, paired with --table)")
	poll := fs.Duration("poll-interval", 0, "catalog poll `interval` (default from config: 10s)")
	brokers := fs.String("kafka-brokers", "", "Kafka bootstrap `servers` host:port,... for commit notifications (default: none, poll only)")
	commitTopic := fs.String("commit-topic", "", "commit notification `topic` (default streamidx-commits)")
	httpAddr := fs.String("http", "", "listen `address` of /metrics, /healthz, /readyz, or none (default 127.0.0.1:9464)")
	policy := fs.String("policy", "", "alignment `policy`: every or latest (default every)")
	stageDir := fs.String("stage-dir", "", "staging store `directory` (default ./streamidx-data/staging)")
	once := fs.Bool("once", false, "align every index once and exit (no Kafka, no HTTP): for cron jobs and measurements")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if len(tables) != len(indexes) {
		return exitError, fmt.Errorf("--table and --index come in pairs: got %d tables and %d indexes", len(tables), len(indexes))
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	rc := &e.cfg.Run
	for i := range tables {
		rc.Indexes = append(rc.Indexes, config.IndexRef{Table: tables[i], Index: indexes[i]})
	}
	for key, v := range map[string]string{"run.kafka.brokers": *brokers, "run.kafka.commit-topic": *commitTopic,
		"run.http": *httpAddr, "run.policy": *policy, "run.stage-dir": *stageDir} {
		if v != "" {
			if err := e.cfg.Set(key, v); err != nil {
				return exitError, err
			}
		}
	}
	if rc.HTTP == "none" {
		rc.HTTP = ""
	}
	if *poll > 0 {
		rc.PollInterval = config.Duration(*poll)
	}
	if err := e.cfg.Validate(); err != nil {
		return exitError, err
	}
	if len(rc.Indexes) == 0 {
		return exitError, errors.New("no index to maintain: give --table/--index pairs or run.indexes in the config")
	}
	d, err := newDaemon(e, e.cfg.Run)
	if err != nil {
		return exitError, err
	}
	if *once {
		return d.runOnce(ctx, stdout)
	}
	if err := d.run(ctx); err != nil {
		return exitError, err
	}
	fmt.Fprintln(stdout, "streamidx run: stopped")
	return exitOK, nil
}

// daemon is the process of streamidx run: one worker per index, a
// notification consumer when Kafka is configured, and the HTTP server.
type daemon struct {
	e        *env
	cfg      config.RunConfig
	log      *slog.Logger
	reg      *prometheus.Registry
	store    *staging.Store
	workers  map[string][]*worker // by table "ns.t"
	ready    atomic.Bool
	listener net.Listener
}

// worker keeps one index fresh. Wake-ups coalesce: one pending is enough.
type worker struct {
	ref     config.IndexRef
	upd     *updater.Updater
	wake    chan struct{}
	mu      sync.Mutex
	waiters []waiter // notifications waiting for a snapshot to be covered
	synced  atomic.Bool
}

type waiter struct {
	snapshotID int64
	sequence   int64
	props      map[string]string
	done       chan error
}

// Index snapshot properties that record the feeds a snapshot covers.
const (
	// propSourceOffsets holds the notification's "offsets" object: the
	// change-topic offsets the source commit covers.
	propSourceOffsets = "streamidx.source-offsets"
	// propNotification is topic/partition/offset of the newest commit
	// notification the index snapshot covers.
	propNotification = "streamidx.commit-notification"
)

// pendingProps are the properties for the next index snapshot: those of the
// newest notification waiting, since the snapshot covers the table's current
// state and so every notification that arrived before it.
func (w *worker) pendingProps() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var best *waiter
	for i := range w.waiters {
		if best == nil || w.waiters[i].sequence > best.sequence {
			best = &w.waiters[i]
		}
	}
	if best == nil {
		return nil
	}
	return best.props
}

func newDaemon(e *env, cfg config.RunConfig) (*daemon, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store, err := staging.OpenStore(cfg.StageDir, staging.StoreOptions{Logger: e.log})
	if err != nil {
		return nil, fmt.Errorf("open staging store %s: %w", cfg.StageDir, err)
	}
	if err := updater.Recover(store, e.log); err != nil {
		store.Close()
		return nil, err
	}
	metrics := updater.NewMetrics(reg)
	d := &daemon{e: e, cfg: cfg, log: e.log, reg: reg, store: store, workers: map[string][]*worker{}}
	for _, ref := range cfg.Indexes {
		id, err := parseTable(ref.Table)
		if err != nil {
			store.Close()
			return nil, err
		}
		u := updater.New(e.cat, e.indexes, store, id, ref.Index, updater.Options{
			Policy: updater.Policy(cfg.Policy),
			Range: compactor.RangeWriterOptions{
				TargetFileSize: int64(e.cfg.Build.TargetFileSize), RowGroupRows: e.cfg.Build.RowGroupRows, IOProperties: e.props,
			},
			MemoryBudget: int64(e.cfg.Build.MemoryBudget), SpillDir: e.cfg.Build.SpillDir,
			Expire: flush.ExpireOptions{RetainLast: cfg.RetainSnapshots, MaxAge: time.Duration(cfg.MaxSnapshotAge), IOProperties: e.props, Logger: e.log},
			Logger: e.log, Metrics: metrics,
		})
		key := strings.Join(id, ".")
		d.workers[key] = append(d.workers[key], &worker{ref: ref, upd: u, wake: make(chan struct{}, 1)})
	}
	return d, nil
}

// run starts every actor and returns when ctx ends (SIGTERM, SIGINT) or an
// actor fails, after stopping the others in order: the consumer first (no
// new work), then the workers (an in-flight update finishes its commit or
// is abandoned before the compare-and-swap, and its staged delta is redone
// at the next start), then the HTTP server.
func (d *daemon) run(ctx context.Context) error {
	defer d.store.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	start := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	if d.cfg.HTTP != "" {
		srv, err := d.httpServer()
		if err != nil {
			return err
		}
		start("http", func(ctx context.Context) error {
			go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
			if err := srv.Serve(d.listener); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	for _, ws := range d.workers {
		for _, w := range ws {
			start("worker "+w.ref.Table+"/"+w.ref.Index, func(ctx context.Context) error { return d.work(ctx, w) })
		}
	}
	if len(d.cfg.Kafka.Brokers) > 0 {
		n, err := ingest.NewNotifier(ingest.NotifierOptions{
			Brokers: d.cfg.Kafka.Brokers, Topic: d.cfg.Kafka.CommitTopic, Group: d.cfg.Kafka.Group,
			DeadLetterTopic: d.cfg.Kafka.DeadLetterTopic, Logger: d.log, Registerer: d.reg,
		}, d.handleNotification)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		start("commit notifications", func(ctx context.Context) error {
			defer n.Close()
			return n.Run(ctx)
		})
	}
	d.log.Info("streamidx run started", "indexes", len(d.cfg.Indexes), "poll_interval", time.Duration(d.cfg.PollInterval),
		"kafka", strings.Join(d.cfg.Kafka.Brokers, ","), "http", d.addr(), "policy", d.cfg.Policy)
	wg.Wait()
	close(errc)
	return <-errc
}

// work runs one index's updates: at start, on every wake-up and at every
// poll interval. A failed update is retried at the next tick.
func (d *daemon) work(ctx context.Context, w *worker) error {
	tick := time.NewTicker(time.Duration(d.cfg.PollInterval))
	defer tick.Stop()
	for {
		_, err := w.upd.Step(ctx, w.pendingProps())
		switch {
		case ctx.Err() != nil:
			w.release(ctx.Err())
			return nil
		case err != nil:
			d.log.Warn("index update failed; retrying", "table", w.ref.Table, "index", w.ref.Index, "err", err)
		default:
			w.synced.Store(true)
			d.updateReady()
		}
		w.settle(ctx, d)
		select {
		case <-ctx.Done():
			w.release(ctx.Err())
			return nil
		case <-tick.C:
		case <-w.wake:
		}
	}
}

// settle answers the notifications whose snapshot the index now covers.
func (w *worker) settle(ctx context.Context, d *daemon) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waiters) == 0 {
		return
	}
	covered, err := d.covered(ctx, w)
	if err != nil {
		return
	}
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if covered(wt.snapshotID) {
			wt.done <- nil
		} else {
			kept = append(kept, wt)
		}
	}
	w.waiters = kept
}

func (w *worker) release(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range w.waiters {
		wt.done <- err
	}
	w.waiters = nil
}

// covered reports which snapshots the index's current snapshot covers: its
// source snapshot and that snapshot's ancestors.
func (d *daemon) covered(ctx context.Context, w *worker) (func(int64) bool, error) {
	id, _ := parseTable(w.ref.Table)
	md, _, err := d.e.indexes.Load(ctx, id, w.ref.Index)
	if err != nil {
		return nil, err
	}
	cur := md.CurrentSnapshot()
	if cur == nil {
		return func(int64) bool { return false }, nil
	}
	tbl, err := d.e.cat.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return func(snap int64) bool { return isAncestor(tbl, cur.SourceTableSnapshotID, snap) }, nil
}

// isAncestor reports whether snap is head or one of its ancestors.
func isAncestor(tbl *table.Table, head, snap int64) bool {
	for s := tbl.SnapshotByID(head); s != nil; {
		if s.SnapshotID == snap {
			return true
		}
		if s.ParentSnapshotID == nil {
			return false
		}
		s = tbl.SnapshotByID(*s.ParentSnapshotID)
	}
	return false
}

// handleNotification wakes the workers of the table and waits until their
// indexes cover the snapshot, so the notification's offset is committed
// only after the index commit. A notification for a table no worker serves
// is done at once; one for a snapshot not yet in the catalog waits (the
// worker's polls reload the table) rather than being dropped.
func (d *daemon) handleNotification(ctx context.Context, n ingest.Notification) error {
	ws := d.workers[n.Table]
	if len(ws) == 0 {
		d.log.Debug("notification for a table without indexes here", "table", n.Table)
		return nil
	}
	var dones []chan error
	for _, w := range ws {
		done := make(chan error, 1)
		w.mu.Lock()
		props := map[string]string{propNotification: fmt.Sprintf("%s/%d/%d", n.Topic, n.Partition, n.Offset)}
		if len(n.Offsets) > 0 {
			props[propSourceOffsets] = string(n.Offsets)
		}
		w.waiters = append(w.waiters, waiter{snapshotID: n.SnapshotID, sequence: n.SequenceNumber, props: props, done: done})
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
		dones = append(dones, done)
	}
	for _, done := range dones {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (d *daemon) updateReady() {
	for _, ws := range d.workers {
		for _, w := range ws {
			if !w.synced.Load() {
				return
			}
		}
	}
	d.ready.Store(true)
}

func (d *daemon) httpServer() (*http.Server, error) {
	ln, err := net.Listen("tcp", d.cfg.HTTP)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", d.cfg.HTTP, err)
	}
	d.listener = ln
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.ready.Load() {
			http.Error(w, "not ready: indexes are catching up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, nil
}

func (d *daemon) addr() string {
	if d.listener == nil {
		return ""
	}
	return d.listener.Addr().String()
}

// runOnce aligns every index with its table once.
func (d *daemon) runOnce(ctx context.Context, stdout io.Writer) (int, error) {
	defer d.store.Close()
	for _, ws := range d.workers {
		for _, w := range ws {
			began := time.Now()
			n, err := w.upd.Step(ctx, nil)
			if err != nil {
				return exitError, fmt.Errorf("update %s/%s: %w", w.ref.Table, w.ref.Index, err)
			}
			fmt.Fprintf(stdout, "%s/%s: %d index snapshots published in %s\n", w.ref.Table, w.ref.Index, n, time.Since(began).Round(time.Millisecond))
		}
	}
	return exitOK, nil
}
