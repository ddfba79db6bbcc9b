package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/streamidx/streamidx/rewrite"
	"github.com/streamidx/streamidx/updater"
)

// tableRewrites runs the rewrites of one table's equality deletes
// (run.rewrite-deletes) beside the updates of its indexes, one at a time.
// A rewrite plans on the table snapshot that its index covers
// (rewrite.Options.AtIndexed), so it needs nothing from the updater: a
// commit notified while a rewrite plans, writes or commits is indexed at
// once, by the worker, on the other core. The rewrite then commits on the
// new head when the commits since its snapshot left alone what it changes
// (the writer's own upserts only add files), and otherwise waits for the
// next update.
type tableRewrites struct {
	mu sync.Mutex
	// running is set while a rewrite of the table runs; next is the worker
	// that asked for another while it ran, through whose index the rewrite
	// runs again after.
	running bool
	next    *worker
	// committed is the table snapshot the last rewrite committed when it
	// committed on the snapshot it planned on: an index that has just
	// caught up with it has nothing new to rewrite. 0 otherwise.
	committed atomic.Int64
}

// requestRewrite starts a rewrite of w's table through w's index beside
// the updates, after w published index snapshots, or has one run again
// when it is already running.
func (d *Daemon) requestRewrite(ctx context.Context, w *worker) {
	r := w.rewrites
	if !d.cfg.Run.RewriteDeletes.Enabled || w.noRewrite.Load() || w.indexed.Load() == r.committed.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		r.next = w
		return
	}
	r.running = true
	d.rewriting.Go(func() { d.rewriteLoop(ctx, w) })
}

// rewriteLoop runs rewrites of w's table until none is asked for: a failed
// one is retried with backoff while w runs, and one asked for while it ran
// runs after it.
func (d *Daemon) rewriteLoop(ctx context.Context, w *worker) {
	r := w.rewrites
	failures := 0
	for {
		err := d.rewriteDeletes(ctx, w, true)
		switch {
		case ctx.Err() != nil:
		case err != nil && updater.IsHalt(err):
			// A broken index file halts the index's own updates too;
			// retrying the rewrite cannot mend it.
			d.log.Error("equality deletes not rewritten", "table", w.table, "index", w.index, "err", err)
		case err != nil && !w.isHalted():
			failures++
			if d.backOff(ctx, w, "equality delete rewrite failed; retrying", failures, err) {
				continue
			}
		}
		r.mu.Lock()
		next := r.next
		r.next = nil
		if next == nil || ctx.Err() != nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		w, failures = next, 0
	}
}

// rewriteDeletes turns the equality deletes of w's table into deletion
// vectors through w's index, when run.rewrite-deletes is on and the index
// stores row locations, and wakes the table's workers to follow the
// rewrite. Beside the updates (beside), the rewrite plans on the table
// snapshot the index covers; otherwise (--once) it brings the index up to
// the table first and to the rewrite after. A rewrite that other writers
// kept conflicting with, or that the index lags too far behind for, is
// logged and tried again after the next update.
func (d *Daemon) rewriteDeletes(ctx context.Context, w *worker, beside bool) error {
	rc := d.cfg.Run.RewriteDeletes
	if !rc.Enabled || w.noRewrite.Load() {
		return nil
	}
	opts := rewrite.Options{Index: w.index, MinFiles: rc.MinFiles, Store: d.files, Logger: d.log, AtIndexed: beside}
	switch {
	case beside && d.beforeRewrite != nil:
		d.beforeRewrite(w)
	case !beside:
		opts.Align = func(ctx context.Context, _ string) error {
			_, err := d.align(ctx, w, nil)
			return err
		}
	}
	res, err := rewrite.Run(ctx, d.tables, d.indexes, w.id, opts)
	if res != nil {
		d.metrics.observeRewrite(w, res)
	}
	switch {
	case errors.Is(err, rewrite.ErrNoLocationIndex):
		w.noRewrite.Store(true)
		d.log.Info("index stores no row locations: it does not rewrite equality deletes", "table", w.table, "index", w.index)
		return nil
	case errors.Is(err, rewrite.ErrConflict), errors.Is(err, rewrite.ErrIndexLags):
		d.log.Info("equality deletes not rewritten this time", "table", w.table, "index", w.index, "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("rewrite equality deletes: %w", err)
	}
	if res.CommittedSnapshotID != 0 {
		// An index that catches up with the rewrite's snapshot has
		// nothing new to rewrite only when the rewrite committed on the
		// snapshot it planned on: commits in between may have added
		// equality deletes that its plan did not see.
		committed := res.CommittedSnapshotID
		if res.CommittedOn != res.SnapshotID {
			committed = 0
		}
		w.rewrites.committed.Store(committed)
		for _, o := range d.byTable[w.table] {
			o.poke()
		}
	}
	return nil
}
