package daemon

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/config"
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
		for {
			tbl, err := testtables.TryUpsert(h.tbl, []int64{int64(c), int64(20 + c)}, c)
			if err == nil {
				h.tbl = tbl
				break
			}
			if !errors.Is(err, table.ErrCommitFailed) {
				t.Fatalf("upsert commit %d: %v", c, err)
			}
			if h.tbl, err = h.cat.LoadTable(ctx, h.tbl.Identifier()); err != nil {
				t.Fatal(err)
			}
		}
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

// TestRewriteGivesWayToANotifiedCommit: a rewrite that finds a commit
// notified (the worker's wake-up pending) once it has planned writes and
// commits nothing, up to maxGiveWays times in a row; the next one runs
// whatever is pending, and so does a rewrite told not to give way (--once).
func TestRewriteGivesWayToANotifiedCommit(t *testing.T) {
	h := newHarness(t, 0, "pk")
	h.cfg.Run.RewriteDeletes.Enabled = true
	d, err := New(h.cat, h.indexes, nil, h.cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	w := d.workers[0]
	head := func() int64 {
		tbl, err := h.cat.LoadTable(ctx, h.tbl.Identifier())
		if err != nil {
			t.Fatal(err)
		}
		return tbl.CurrentSnapshot().SnapshotID
	}
	upsert := func(c int) {
		tbl, err := testtables.TryUpsert(h.tbl, []int64{int64(c)}, c)
		if err != nil {
			t.Fatal(err)
		}
		h.tbl = tbl
		if _, err := d.align(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	upsert(1)
	before := head()
	for i := 1; i <= maxGiveWays; i++ {
		w.poke()
		if err := d.rewriteDeletes(ctx, w, true); err != nil {
			t.Fatal(err)
		}
		if got := head(); got != before || w.gaveWay != i {
			t.Fatalf("rewrite %d with a commit notified: table head %d (was %d), %d in a row gave way", i, got, before, w.gaveWay)
		}
	}
	if err := d.rewriteDeletes(ctx, w, true); err != nil {
		t.Fatal(err)
	}
	if head() == before || w.gaveWay != 0 {
		t.Fatalf("the rewrite after %d that gave way did not commit (%d in a row)", maxGiveWays, w.gaveWay)
	}
	h.tbl, _ = h.cat.LoadTable(ctx, h.tbl.Identifier())
	upsert(2)
	before = head()
	if err := d.rewriteDeletes(ctx, w, false); err != nil {
		t.Fatal(err)
	}
	if head() == before {
		t.Fatal("a rewrite told not to give way did not commit with a commit notified")
	}
	h.verifyAll("pk")
}
