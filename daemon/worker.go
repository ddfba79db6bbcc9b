package daemon

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/updater"
)

// worker keeps one index fresh. It never waits for another worker: a
// notification wakes every worker of its table at once, and workers of
// different indexes run in parallel up to run.max-parallel-updates.
type worker struct {
	table string // "ns.t"
	id    table.Identifier
	index string
	upd   *updater.Updater
	// wake holds at most one pending wake-up: wake-ups coalesce.
	wake chan struct{}
	// synced is set once the index has caught up with its table.
	synced atomic.Bool
	// waiting is set while an events-fed index waits for its change feed.
	waiting atomic.Bool

	mu      sync.Mutex
	haltErr error // why the worker stopped for good; nil while it runs
}

func (w *worker) name() string { return w.table + "/" + w.index }

// poke wakes the worker without waiting.
func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) isHalted() bool { return w.halted() != nil }

func (w *worker) halted() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.haltErr
}

// Retry delays after failed updates: exponential from retryBase, capped at
// retryMax, with jitter so that workers failing together (a catalog outage)
// do not retry together.
const (
	retryBase = 250 * time.Millisecond
	retryMax  = 30 * time.Second
)

// retryDelay is the delay before retry attempt n (1 for the first): a
// random point in the upper half of min(retryBase*2^(n-1), retryMax).
func retryDelay(n int) time.Duration {
	d := retryMax
	if n < 20 {
		d = min(retryBase<<(n-1), retryMax)
	}
	return d/2 + rand.N(d/2+1)
}

// work runs w until ctx ends or w halts: an alignment at start, at every
// wake-up and at every poll interval; a failed one is retried with backoff.
func (d *Daemon) work(ctx context.Context, w *worker) {
	tick := time.NewTicker(time.Duration(d.cfg.Run.PollInterval))
	defer tick.Stop()
	failures := 0
	for {
		_, err := d.align(ctx, w)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && updater.IsHalt(err):
			d.halt(w, err)
			return
		case err != nil:
			failures++
			delay := retryDelay(failures)
			d.log.Warn("index update failed; retrying", "table", w.table, "index", w.index, "attempt", failures,
				"retry_in", delay.Round(time.Millisecond), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		failures = 0
		if !w.waiting.Load() && !w.synced.Swap(true) {
			d.log.Info("index caught up with its table", "table", w.table, "index", w.index)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.wake:
		}
	}
}

// align steps w's updater until the index covers the table's current
// snapshot and returns how many index snapshots it published. Each step
// holds one of the parallel-update slots, so workers take turns fairly.
func (d *Daemon) align(ctx context.Context, w *worker) (published int, err error) {
	for {
		select {
		case d.slots <- struct{}{}:
		case <-ctx.Done():
			return published, ctx.Err()
		}
		if d.beforeStep != nil {
			d.beforeStep(w)
		}
		st, err := w.upd.Step(ctx, d.ledger.propsFor(w))
		<-d.slots
		if ctx.Err() != nil {
			return published, ctx.Err() // shutting down: an abandoned update is no failure
		}
		d.metrics.observe(w, st, err)
		if st.Table != nil {
			d.ledger.cover(w, st.Table, st.IndexedSnapshotID)
		}
		if st.Published != nil {
			published++
		}
		w.waiting.Store(st.Waiting != "")
		if st.Waiting != "" {
			d.log.Debug("events-fed index waits for its change feed", "table", w.table, "index", w.index, "why", st.Waiting)
		}
		if err != nil || st.Aligned || st.Waiting != "" {
			return published, err
		}
	}
}

// halt stops maintaining w's index after an error retrying cannot fix. The
// other indexes keep running; /readyz names the halted one until an
// operator has repaired or rebuilt it and restarted the daemon.
func (d *Daemon) halt(w *worker, err error) {
	w.mu.Lock()
	w.haltErr = err
	w.mu.Unlock()
	d.metrics.halted.WithLabelValues(w.table, w.index).Set(1)
	attrs := []any{"table", w.table, "index", w.index, "err", err}
	if path, ok := format.CorruptPath(err); ok {
		attrs = append(attrs, "file", path)
	}
	d.log.Error("index halted: retrying cannot fix this error; the other indexes keep running", attrs...)
	d.ledger.settle(w.table)
}
