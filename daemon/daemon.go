package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/extsort"
	"github.com/streamidx/streamidx/internal/httptls"
	"github.com/streamidx/streamidx/internal/kafkaconn"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/pace"
	"github.com/streamidx/streamidx/internal/procs"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// Daemon keeps the indexes of run.indexes aligned with their tables. Build
// it with New, then call Run (or RunOnce) and finally Close.
type Daemon struct {
	tables  catalog.Catalog
	indexes indexcatalog.Catalog
	cfg     config.Config
	log     *slog.Logger
	reg     prometheus.Registerer
	metrics *metrics
	store   *staging.Store
	// changeTopics feed the events-fed indexes (run.kafka.change-topics),
	// read by feed; both are nil without Kafka.
	changeTopics []config.ChangeTopic
	feed         *changeFeed
	files        *objstore.Store
	workers      []*worker
	byTable      map[string][]*worker
	ledger       *ledger
	// gate lets short updates run ahead of long ones (run.long-update-after);
	// nil when off or with one index.
	gate *pace.Gate
	// slots bounds the updates running at once (run.max-parallel-updates).
	slots    chan struct{}
	listener net.Listener
	// tls, when set, makes the listener speak HTTPS (serve.tls-cert-file).
	tls *tls.Config
	// mounts are the handlers Mount added to the HTTP server.
	mounts []mount
	// warm, set by WarmWith, runs once per index after it first caught
	// up; warming counts those running, which Run waits for.
	warm    WarmFunc
	warming sync.WaitGroup
	// rewriting counts the rewrites of equality deletes running beside the
	// updates (run.rewrite-deletes), which Run waits for.
	rewriting sync.WaitGroup

	// now is the clock of notification timeouts; beforeStep, when set, is
	// called before each update step while it holds its slot,
	// beforeRewrite before each rewrite that runs beside the updates, and
	// beforeNote before the change feed reads each record of the commit
	// topic. Tests set them.
	now           func() time.Time
	beforeStep    func(*worker)
	beforeRewrite func(*worker)
	beforeNote    func(*kgo.Record)

	mu      sync.Mutex
	started bool
	closed  bool
	stop    chan struct{} // closed by Close to end Run
	runDone chan struct{} // closed when Run returns
}

// New opens the staging store (abandoning the partial stages a crash left)
// and, when run.http is set, the HTTP listener. tables and indexes stay the
// caller's: Close does not close them. Metrics are registered on reg; when
// reg is also a prometheus.Gatherer (a *prometheus.Registry is), /metrics
// serves it. A nil log discards; a nil reg leaves the metrics unregistered.
func New(tables catalog.Catalog, indexes indexcatalog.Catalog, files *objstore.Store, cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	rc := cfg.Run
	if len(rc.Indexes) == 0 {
		return nil, errors.New("no index to maintain: give --table/--index pairs or run.indexes in the config")
	}
	if rc.StageDir == "" {
		return nil, errors.New("run.stage-dir is empty")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{tables: tables, indexes: indexes, cfg: cfg, log: log, reg: reg, metrics: newMetrics(),
		byTable: map[string][]*worker{}, slots: make(chan struct{}, rc.MaxParallelUpdates), now: time.Now,
		stop: make(chan struct{}), runDone: make(chan struct{})}
	d.ledger = newLedger(d.byTable, func(*kgo.Record) {})
	d.changeTopics, _ = rc.Kafka.ParseChangeTopics() // Validate checked them
	store, err := staging.OpenStore(rc.StageDir, staging.StoreOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	d.store = store
	fail := func(err error) (*Daemon, error) {
		store.Close()
		return nil, err
	}
	if err := updater.Recover(store, log); err != nil {
		return fail(err)
	}
	// A full build killed with the daemon left its spilled sort behind.
	extsort.RemoveStaleSpills(cfg.Build.SpillDir, log)
	if files == nil {
		files = objstore.New(objstore.Options{IOProperties: cfg.IOProperties(), Logger: log})
	}
	d.files = files
	if len(rc.Kafka.Brokers) == 0 {
		d.changeTopics = nil // no feed to follow: events-fed indexes follow the table
	} else if _, err := kafkaconn.Options(rc.Kafka, log); err != nil {
		return fail(err) // a TLS file that does not load stops the start, not the first connection
	}
	seen := map[string]bool{}
	rewrites := map[string]*tableRewrites{}
	// A merge rewrites parts of an index on several cores; the indexes
	// updated at once share the cores, so that one index's large rewrite
	// does not hold back another's small one.
	share := max(1, procs.Work()/max(1, min(len(rc.Indexes), rc.MaxParallelUpdates)))
	// Long updates pause for short ones (run.long-update-after).
	if rc.LongUpdateAfter > 0 && len(rc.Indexes) > 1 {
		d.gate = pace.NewGate(time.Duration(rc.LongUpdateAfter))
	}
	// Expiries remember what each tracking file lists (see flush.References).
	refs := flush.NewReferences()
	for _, ref := range rc.Indexes {
		id, err := config.ParseTable(ref.Table)
		if err != nil {
			return fail(err)
		}
		name := strings.Join(id, ".")
		if seen[name+"/"+ref.Index] {
			continue // listed twice: one worker is enough
		}
		seen[name+"/"+ref.Index] = true
		var events updater.EventFeed
		if topics := topicsOf(d.changeTopics, name); len(topics) > 0 {
			if d.feed == nil {
				d.feed = newChangeFeed(d, d.changeTopics)
			}
			events = &tableFeed{table: name, topics: topics, ledger: d.ledger, notes: d.feed.notes}
		}
		u := updater.New(tables, indexes, store, id, ref.Index, updater.Options{
			Policy:               updater.Policy(rc.Policy),
			AdaptiveMaxSnapshots: rc.Adaptive.MaxSnapshotsBehind, AdaptiveMaxLag: time.Duration(rc.Adaptive.MaxLag),
			Range:        compactor.ConfiguredRangeWriter(cfg.Build, files),
			MemoryBudget: int64(cfg.Build.MemoryBudget), SpillDir: cfg.Build.SpillDir, MergeParallelism: share,
			Expire: flush.ExpireOptions{RetainLast: rc.RetainSnapshots, MaxAge: time.Duration(rc.MaxSnapshotAge), Store: files, Logger: log,
				References: refs},
			Events: events, Gate: d.gate, Logger: log,
		})
		if rewrites[name] == nil {
			rewrites[name] = &tableRewrites{}
		}
		w := &worker{table: name, id: id, index: ref.Index, upd: u, wake: make(chan struct{}, 1), rewrites: rewrites[name], events: events != nil}
		d.workers = append(d.workers, w)
		d.byTable[name] = append(d.byTable[name], w)
		d.metrics.halted.WithLabelValues(name, ref.Index).Set(0)
	}
	if reg != nil {
		if err := d.metrics.register(reg, newBehindCollector(d)); err != nil {
			return fail(fmt.Errorf("register metrics: %w", err))
		}
	}
	if addr := rc.HTTP; addr != "" && addr != "none" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fail(fmt.Errorf("listen on %s: %w", addr, err))
		}
		d.listener = ln
		if cfg.Serve.TLSCertFile != "" {
			if d.tls, err = httptls.Config(cfg.Serve.TLSCertFile, cfg.Serve.TLSKeyFile, log); err != nil {
				ln.Close()
				return fail(err)
			}
		}
	}
	return d, nil
}

type mount struct {
	pattern string
	h       http.Handler
}

// Mount serves h for pattern (a http.ServeMux pattern, such as "/v1/") on
// the HTTP listener, beside /metrics, /healthz and /readyz: the lookup
// service of `streamidx run --serve`. Call it before Run.
func (d *Daemon) Mount(pattern string, h http.Handler) {
	d.mounts = append(d.mounts, mount{pattern, h})
}

// A WarmFunc readies the lookup service for index index of table table
// ("ns.t"): see WarmWith.
type WarmFunc func(ctx context.Context, table, index string) error

// WarmWith makes the daemon call warm for each index once it first caught
// up with its table, apart from its updates; /readyz answers "not ready"
// until warm returned for every index. A failed warm-up is logged and
// counts as done: the lookups it would have spared read what they need.
// `streamidx run --serve` warms the lookup cache so. Call it before Run.
func (d *Daemon) WarmWith(warm WarmFunc) {
	d.warm = warm
}

// NumIndexes is the number of indexes the daemon keeps fresh.
func (d *Daemon) NumIndexes() int { return len(d.workers) }

// Addr is the address the HTTP server listens on; "" when it is off.
func (d *Daemon) Addr() string {
	if d.listener == nil {
		return ""
	}
	return d.listener.Addr().String()
}

// Run runs the daemon until ctx ends or Close is called, then shuts down in
// order: the notification consumer stops reading, the workers stop (an
// update in flight either completes its compare-and-swap or is abandoned
// before it; its staged delta is reused at the next start), the offsets of
// what is covered are committed, and the HTTP server stops last, so that
// /metrics and /healthz answer until the end. It returns the error of the
// part that failed, or nil. Run may be called once.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.started || d.closed {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice or after Close")
	}
	d.started = true
	d.mu.Unlock()
	defer close(d.runDone)

	var g group
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.add("stop", func() error {
		select {
		case <-runCtx.Done():
		case <-d.stop:
		}
		return nil
	}, cancel)

	var cons *consumer
	if len(d.cfg.Run.Kafka.Brokers) > 0 {
		var err error
		if cons, err = newConsumer(d); err != nil {
			return err
		}
		defer cons.close()
		d.ledger.mark = func(r *kgo.Record) { cons.client.MarkCommitRecords(r) }
		consCtx, stopConsumer := context.WithCancel(context.Background())
		g.add("commit notifications", func() error { return cons.run(consCtx) }, stopConsumer)
	}

	if feed := d.feed; feed != nil {
		defer feed.close()
		feedCtx, stopFeed := context.WithCancel(context.Background())
		k := d.cfg.Run.Kafka
		go feed.caught.bound(runCtx, k.CommitTopic, time.Duration(k.CatchUpTimeout), d.log)
		g.add("change events", func() error { return feed.run(feedCtx) }, stopFeed)
	}

	workCtx, stopWorkers := context.WithCancel(context.Background())
	g.add("workers", func() error {
		var wg sync.WaitGroup
		for _, w := range d.workers {
			wg.Go(func() { d.work(workCtx, w) })
		}
		<-workCtx.Done()
		wg.Wait()
		d.rewriting.Wait()
		d.warming.Wait()
		if cons != nil {
			cons.close() // commit what the last updates covered
		}
		return nil
	}, stopWorkers)

	if d.listener != nil {
		srv := d.httpServer()
		g.add("http", func() error {
			var err error
			if d.tls != nil {
				srv.TLSConfig = d.tls
				err = srv.ServeTLS(d.listener, "", "")
			} else {
				err = srv.Serve(d.listener)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		})
	}
	d.log.Info("streamidx run started", "indexes", len(d.workers), "poll_interval", time.Duration(d.cfg.Run.PollInterval),
		"kafka", strings.Join(d.cfg.Run.Kafka.Brokers, ","), "change_topics", topicNames(d.changeTopics), "http", d.Addr(), "policy", d.cfg.Run.Policy,
		"max_parallel_updates", d.cfg.Run.MaxParallelUpdates)
	return g.run()
}

// OnceResult is what RunOnce did for one index.
type OnceResult struct {
	Table, Index string
	Published    int
	Took         time.Duration
}

// RunOnce aligns every index with its table once, one index after the
// other, without Kafka or HTTP: for cron jobs and measurements. With
// run.rewrite-deletes on, each table's equality deletes are rewritten too,
// and every index follows the rewrite.
func (d *Daemon) RunOnce(ctx context.Context) ([]OnceResult, error) {
	d.mu.Lock()
	if d.started || d.closed {
		d.mu.Unlock()
		return nil, errors.New("daemon: RunOnce called after Run or Close")
	}
	d.started = true
	d.mu.Unlock()
	defer close(d.runDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.stop: // Close ends RunOnce too
			cancel()
		case <-ctx.Done():
		}
	}()
	var out []OnceResult
	for _, w := range d.workers {
		began := time.Now()
		n, err := d.align(ctx, w, nil)
		if err == nil {
			err = d.rewriteDeletes(ctx, w, false)
		}
		if err != nil {
			return out, fmt.Errorf("update %s: %w", w.name(), err)
		}
		out = append(out, OnceResult{Table: w.table, Index: w.index, Published: n, Took: time.Since(began)})
	}
	if d.cfg.Run.RewriteDeletes.Enabled {
		// Indexes aligned before a rewrite of their table follow it.
		for i, w := range d.workers {
			began := time.Now()
			n, err := d.align(ctx, w, nil)
			if err != nil {
				return out, fmt.Errorf("update %s: %w", w.name(), err)
			}
			out[i].Published += n
			out[i].Took += time.Since(began)
		}
	}
	return out, nil
}

// Close ends a running Run or RunOnce (as if its context ended) and waits
// for it, then closes the staging store and the HTTP listener. It is
// idempotent.
func (d *Daemon) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	started := d.started
	d.mu.Unlock()
	close(d.stop)
	if started {
		<-d.runDone
	}
	var errs []error
	if d.listener != nil {
		if err := d.listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, d.store.Close())
	return errors.Join(errs...)
}
