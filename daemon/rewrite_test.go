package daemon

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/testtables"
)

// With run.rewrite-deletes on, an upsert's equality delete is rewritten
// into position deletes after the indexes publish, both indexes follow the
// rewrite and stay exact, and the rewrite metrics count it.
func TestRunRewritesEqualityDeletes(t *testing.T) {
	h := newHarness(t, 0, "pk", "by_customer")
	h.cfg.Run.PollInterval = config.Duration(100 * time.Millisecond)
	h.cfg.Run.RewriteDeletes.Enabled = true
	r := h.start(nil)
	ctx := context.Background()
	// 30 upsert commits while the daemon rewrites: a commit that meets a
	// rewrite's commit is retried on the new head, as a CDC writer does.
	for c := 1; c <= 30; c++ {
		tbl, err := testtables.UpsertRetrying(h.cat, h.tbl, []int64{int64(c), int64(20 + c)}, c)
		if err != nil {
			t.Fatalf("upsert commit %d: %v", c, err)
		}
		h.tbl = tbl
	}
	waitFor(t, "no equality delete file is live and both indexes cover the table", func() bool {
		tbl, err := h.cat.LoadTable(ctx, h.tbl.Identifier())
		if err != nil {
			t.Fatal(err)
		}
		h.tbl = tbl
		head := tbl.CurrentSnapshot().SnapshotID
		return len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)) == 0 && h.indexed("pk") == head && h.indexed("by_customer") == head
	})
	h.verifyAll("pk")
	h.verifyAll("by_customer")
	_, body := r.get(t, "/metrics")
	sum := func(name string) float64 {
		var total float64
		for _, index := range []string{"pk", "by_customer"} {
			v, err := metric(body, name+`{index="`+index+`",table="test.orders"}`)
			if err != nil {
				continue
			}
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
		return total
	}
	if sum("streamidx_rewrite_commits_total") < 1 || sum("streamidx_rewrite_equality_files_removed_total") < 1 ||
		sum("streamidx_rewrite_positions_total") < 1 || sum("streamidx_rewrite_seconds_count") < 1 {
		t.Fatalf("rewrite metrics: commits %v, files removed %v, positions %v, seconds count %v",
			sum("streamidx_rewrite_commits_total"), sum("streamidx_rewrite_equality_files_removed_total"),
			sum("streamidx_rewrite_positions_total"), sum("streamidx_rewrite_seconds_count"))
	}
}

// A rewrite runs beside the updates: while one is held before it plans, a
// writer's commit is indexed all the same; released, the rewrite commits,
// the index follows it, and both stay exact.
func TestRewriteRunsBesideTheUpdates(t *testing.T) {
	h := newHarness(t, 0, "pk")
	h.cfg.Run.PollInterval = config.Duration(50 * time.Millisecond)
	h.cfg.Run.RewriteDeletes.Enabled = true
	held, release := make(chan struct{}, 1), make(chan struct{})
	first := true
	h.start(func(d *Daemon) {
		d.beforeRewrite = func(*worker) {
			if first {
				first = false
				held <- struct{}{}
				<-release
			}
		}
	})
	ctx := context.Background()
	upsert := func(c int) {
		t.Helper()
		tbl, err := testtables.UpsertRetrying(h.cat, h.tbl, []int64{int64(c), int64(40 + c)}, c)
		if err != nil {
			t.Fatalf("upsert commit %d: %v", c, err)
		}
		h.tbl = tbl
	}
	upsert(1)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no rewrite started after the index published the upsert")
	}
	upsert(2)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID) // while the rewrite is held
	close(release)
	waitFor(t, "no equality delete file is live and the index covers the table", func() bool {
		tbl, err := h.cat.LoadTable(ctx, h.tbl.Identifier())
		if err != nil {
			t.Fatal(err)
		}
		h.tbl = tbl
		return len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)) == 0 && h.indexed("pk") == tbl.CurrentSnapshot().SnapshotID
	})
	h.verifyAll("pk")
}

// A rewrite planned on the snapshot the index covers commits on the head a
// writer moved meanwhile; the writer's equality delete, which the plan did
// not see, is rewritten once the index has caught up with the rewrite,
// though no commit follows.
func TestRewriteCatchesTheDeletesCommittedUnderIt(t *testing.T) {
	h := newHarness(t, 0, "pk")
	h.cfg.Run.PollInterval = config.Duration(50 * time.Millisecond)
	h.cfg.Run.RewriteDeletes.Enabled = true
	var (
		mu         sync.Mutex
		armed      int64 // the snapshot of the first upsert, once committed
		hold, done bool
		release    = make(chan struct{})
		unhold     sync.Once
	)
	letGo := func() {
		unhold.Do(func() {
			mu.Lock()
			hold = false
			mu.Unlock()
			close(release)
		})
	}
	t.Cleanup(letGo)
	upsert := func(c int) {
		tbl, err := testtables.UpsertRetrying(h.cat, h.tbl, []int64{int64(c), int64(40 + c)}, c)
		if err != nil {
			t.Errorf("upsert commit %d: %v", c, err)
			return
		}
		h.tbl = tbl
	}
	h.start(func(d *Daemon) {
		d.beforeStep = func(*worker) {
			mu.Lock()
			held := hold
			mu.Unlock()
			if held {
				<-release
			}
		}
		d.beforeRewrite = func(w *worker) {
			mu.Lock()
			defer mu.Unlock()
			if done || armed == 0 || w.indexed.Load() != armed {
				return
			}
			// The index covers the first upsert; the writer commits a
			// second one, which the index does not see before the rewrite
			// has committed.
			done, hold = true, true
			upsert(2)
		}
	})
	ctx, id := context.Background(), h.tbl.Identifier()
	mu.Lock()
	upsert(1)
	armed = h.tbl.CurrentSnapshot().SnapshotID
	mu.Unlock()
	waitFor(t, "the rewrite commits on the second upsert", func() bool {
		tbl, err := h.cat.LoadTable(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		head := tbl.CurrentSnapshot()
		return head.Summary != nil && head.Summary.Properties[lineage.RewriteDeletesProperty] == "true"
	})
	letGo()
	h.waitRewritten("pk")
	h.verifyAll("pk")
}

// TestRewritesFollowTheIndexAsItCatchesUp: an index several commits behind
// its table (policy every) publishes one snapshot per commit, and a
// rewrite runs after each, planned on it, while the index goes on catching
// up: on a v3 table it commits over the earlier rewrites (deletion vectors
// that hold both). At the end no equality delete is live and the index is
// exact.
func TestRewritesFollowTheIndexAsItCatchesUp(t *testing.T) {
	h := newHarnessOf(t, 3, 0, "pk")
	h.cfg.Run.PollInterval = config.Duration(50 * time.Millisecond)
	h.cfg.Run.RewriteDeletes.Enabled = true
	var (
		hold, released  atomic.Bool
		release         = make(chan struct{})
		rewroteBehind   = make(chan struct{})
		behind          sync.Once
		steps, rewrites atomic.Int32
		last            atomic.Int64
		early           = map[int64]bool{} // the upserts before the last; read once last is set
	)
	h.start(func(d *Daemon) {
		d.beforeStep = func(*worker) {
			if hold.Load() {
				<-release
			}
			if released.Load() && steps.Add(1) == 2 {
				// The second step after the release waits for a rewrite
				// planned on the first one's snapshot (or gives up).
				select {
				case <-rewroteBehind:
				case <-time.After(10 * time.Second):
				}
			}
		}
		d.beforeRewrite = func(w *worker) {
			if last.Load() != 0 && early[w.indexed.Load()] {
				rewrites.Add(1)
				behind.Do(func() { close(rewroteBehind) })
			}
		}
	})
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID)
	hold.Store(true)
	for c := 1; c <= 4; c++ {
		tbl, err := testtables.UpsertRetrying(h.cat, h.tbl, []int64{int64(c), int64(20 + c), int64(40 + c)}, c)
		if err != nil {
			t.Fatal(err)
		}
		h.tbl = tbl
		if c < 4 {
			early[tbl.CurrentSnapshot().SnapshotID] = true
		}
	}
	last.Store(h.tbl.CurrentSnapshot().SnapshotID)
	released.Store(true)
	hold.Store(false)
	close(release)
	h.waitRewritten("pk")
	if rewrites.Load() == 0 {
		t.Error("no rewrite ran while the index caught up")
	}
	committed := 0
	for _, s := range h.tbl.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Properties[lineage.RewriteDeletesProperty] == "true" {
			committed++
		}
	}
	if committed < 2 {
		t.Errorf("%d rewrites committed; want one planned on an index snapshot behind the table and more after it", committed)
	}
	h.verifyAll("pk")
}

// waitRewritten waits until no equality delete file is live in the table
// and index covers its current snapshot, which h.tbl then is.
func (h *harness) waitRewritten(index string) {
	h.t.Helper()
	waitFor(h.t, "no equality delete file is live and the index covers the table", func() bool {
		tbl, err := h.cat.LoadTable(context.Background(), h.tbl.Identifier())
		if err != nil {
			h.t.Fatal(err)
		}
		h.tbl = tbl
		return len(testtables.LiveFiles(h.t, tbl, iceberg.EntryContentEqDeletes)) == 0 && h.indexed(index) == tbl.CurrentSnapshot().SnapshotID
	})
}
