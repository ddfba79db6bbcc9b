package daemon

import (
	"context"
	"fmt"
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
	// events is set when the index's table has change topics: an
	// events-fed index may follow them.
	events bool
	// wake holds at most one pending wake-up: wake-ups coalesce.
	wake chan struct{}
	// synced is set once the index has caught up with its table; warmed
	// once the daemon's WarmFunc returned for it (or there is none).
	synced atomic.Bool
	warmed atomic.Bool
	// waiting is set while an events-fed index waits for its change feed.
	waiting atomic.Bool

	// rewrites is shared by the workers of one table (see rewrite.go).
	// noRewrite is set once a rewrite through this index was refused
	// because the index stores no row locations.
	rewrites  *tableRewrites
	noRewrite atomic.Bool
	// indexed is the table snapshot the index covers after the last step.
	indexed atomic.Int64

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

// backOff logs failure n in a row of w's work (msg, err) and waits the
// retry delay before attempt n+1; false when ctx ended first.
func (d *Daemon) backOff(ctx context.Context, w *worker, msg string, n int, err error) bool {
	delay := retryDelay(n)
	d.log.Warn(msg, "table", w.table, "index", w.index, "attempt", n, "retry_in", delay.Round(time.Millisecond), "err", err)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(delay):
		return true
	}
}

// startWarm runs the daemon's WarmFunc for w apart from its updates, or
// marks w warmed when there is none.
func (d *Daemon) startWarm(ctx context.Context, w *worker) {
	if d.warm == nil {
		w.warmed.Store(true)
		return
	}
	d.warming.Go(func() {
		defer w.warmed.Store(true)
		if err := d.warm(ctx, w.table, w.index); err != nil && ctx.Err() == nil {
			d.log.Warn("warming the lookup cache failed: the first lookups read what they need", "table", w.table, "index", w.index, "err", err)
		}
	})
}

// work runs w until ctx ends or w halts: an alignment at start, at every
// wake-up and at every poll interval; a failed one is retried with backoff.
func (d *Daemon) work(ctx context.Context, w *worker) {
	tick := time.NewTicker(time.Duration(d.cfg.Run.PollInterval))
	defer tick.Stop()
	failures := 0
	rebuilt := false // since the last alignment that succeeded
	if w.events && d.feed != nil {
		// An events-fed index's first build takes its position in the
		// change feed from a notification: read those already sent first.
		select {
		case <-d.feed.caught.done:
		case <-ctx.Done():
			return
		}
	}
	for {
		// Each index snapshot lets a rewrite plan on it, also while the
		// index is still catching up.
		_, err := d.align(ctx, w, func() { d.requestRewrite(ctx, w) })
		if err != nil && updater.IsHalt(err) && d.cfg.Run.RebuildOnCorruption && format.IsCorruption(err) && !rebuilt && ctx.Err() == nil {
			// A rebuild that meets corruption again halts: the corruption
			// is not in the files a rebuild replaces.
			rebuilt = true
			if err = d.rebuild(ctx, w, err); err == nil {
				continue
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && updater.IsHalt(err):
			d.halt(w, err)
			return
		case err != nil:
			failures++
			if !d.backOff(ctx, w, "index update failed; retrying", failures, err) {
				return
			}
			continue
		}
		failures, rebuilt = 0, false
		if !w.waiting.Load() && !w.synced.Swap(true) {
			d.log.Info("index caught up with its table", "table", w.table, "index", w.index)
			d.startWarm(ctx, w)
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
// snapshot and returns how many index snapshots it published, calling
// onPublish, when set, after each. Each step holds one of the
// parallel-update slots, so workers take turns fairly.
func (d *Daemon) align(ctx context.Context, w *worker, onPublish func()) (published int, err error) {
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
			w.indexed.Store(st.IndexedSnapshotID)
		}
		if st.Published != nil {
			published++
			if onPublish != nil {
				onPublish()
			}
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

// rebuild replaces w's index by a full build from the table after cause,
// a corruption of one of its files (run.rebuild-on-corruption), holding an
// update slot like any step.
func (d *Daemon) rebuild(ctx context.Context, w *worker, cause error) error {
	attrs := []any{"table", w.table, "index", w.index, "err", cause}
	if path, ok := format.CorruptPath(cause); ok {
		attrs = append(attrs, "file", path)
	}
	d.log.Error("index file corrupt: rebuilding it from the table (run.rebuild-on-corruption)", attrs...)
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	st, err := w.upd.Rebuild(ctx, d.ledger.propsFor(w))
	<-d.slots
	d.metrics.observe(w, st, err)
	if st.Table != nil {
		d.ledger.cover(w, st.Table, st.IndexedSnapshotID)
	}
	if err != nil {
		return fmt.Errorf("rebuild after corruption (%v): %w", cause, err)
	}
	d.log.Info("index rebuilt from the table", "table", w.table, "index", w.index, "source_snapshot", st.IndexedSnapshotID)
	return nil
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
