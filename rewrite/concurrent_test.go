package rewrite

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/testtables"
)

// liveRecord is a writer's own record of the live rows: order id -> the
// version it last wrote.
type liveRecord map[int64]int

func (l liveRecord) rows(t *testing.T, tbl *table.Table) map[string]int {
	t.Helper()
	var rows [][]any
	for id, v := range l {
		rows = append(rows, testtables.OrderRow(int(id), v))
	}
	rec, err := testtables.TryRecord(tbl.Schema(), rows)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out := map[string]int{}
	for i := range int(rec.NumRows()) {
		out[rowText(rec, i)]++
	}
	return out
}

// start appends orders [0, 200) and commits 10 upserts, recording what is live.
// It returns the record and the data file of the append.
func start(t *testing.T, e *env) (liveRecord, iceberg.DataFile) {
	t.Helper()
	live := liveRecord{}
	tbl, files := testtables.Append(t, e.tbl, testtables.OrderRows(0, 200, 0)...)
	for id := range int64(200) {
		live[id] = 0
	}
	for c := 1; c <= 10; c++ {
		ids := []int64{int64(c), int64(c * 17 % 200), int64(100 + c)}
		tbl = upsert(t, tbl, ids, c)
		for _, id := range ids {
			live[id] = c
		}
	}
	e.tbl = tbl
	if _, err := e.align(context.Background(), "pk"); err != nil {
		t.Fatal(err)
	}
	return live, files[0]
}

// A writer's upsert lands between the rewrite's plan and its commit: its
// equality delete and data file touch nothing the plan changes, so the
// rewrite commits on top of it without planning again, and keeps the
// writer's equality delete.
func TestRewriteCommitsOverAnUnrelatedUpsert(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	live, _ := start(t, e)
	done := false
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{Align: e.alignFunc, beforeCommit: func() {
		if done {
			return
		}
		done = true
		upsert(t, e.reload(), []int64{5, 150}, 20)
		live[5], live[150] = 20, 20
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 1 || res.Conflicts != 1 {
		t.Fatalf("rewrite: %d plans, %d conflicts; want 1 plan that met 1 conflict", res.Attempts, res.Conflicts)
	}
	tbl := e.reload()
	sameRows(t, "live rows and the writer's record", live.rows(t, tbl), scanRows(t, tbl))
	if n := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)); n != 1 {
		t.Fatalf("%d equality delete files are live; want the writer's one", n)
	}
	e.verifyIndex("pk")
}

// A writer deletes, between the plan and the commit, a row of a data file
// the rewrite writes a deletion vector for: that vector would drop the
// writer's delete, so the rewrite plans again on the writer's snapshot.
func TestRewritePlansAgainAfterAConflictingDelete(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	live, first := start(t, e)
	done := false
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{Align: e.alignFunc, beforeCommit: func() {
		if done {
			return
		}
		done = true
		testtables.AddDV(t, e.reload(), first, 199) // order 199 of the first append
		delete(live, 199)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || res.Conflicts != 1 {
		t.Fatalf("rewrite: %d plans, %d conflicts; want 2 plans after 1 conflict", res.Attempts, res.Conflicts)
	}
	tbl := e.reload()
	sameRows(t, "live rows and the writer's record", live.rows(t, tbl), scanRows(t, tbl))
	if n := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)); n != 0 {
		t.Fatalf("%d equality delete files are live", n)
	}
	e.verifyIndex("pk")
}

// A writer commits upserts as fast as it can while rewrites run one after
// another: afterwards the table's live rows are what the writer recorded.
func TestRewriteWhileWriterUpserts(t *testing.T) {
	ctx := context.Background()
	for _, version := range []int{2, 3} {
		e := newEnv(t, version)
		live, _ := start(t, e)
		writer := make(chan error, 1)
		go func() {
			r := rand.New(rand.NewPCG(3, 4))
			tbl := e.tbl
			for c := 100; c < 130; c++ {
				ids := []int64{r.Int64N(200), r.Int64N(200) + 200}
				var err error
				for {
					var next *table.Table
					if next, err = testtables.TryUpsert(tbl, ids, c); err == nil {
						tbl = next
						break
					}
					if !errors.Is(err, table.ErrCommitFailed) {
						break
					}
					if tbl, err = e.cat.LoadTable(ctx, e.id); err != nil {
						break
					}
				}
				if err != nil {
					writer <- err
					return
				}
				for _, id := range ids {
					live[id] = c
				}
			}
			writer <- nil
		}()
		rewrites := 0
		var writerErr error
	loop:
		for {
			select {
			case writerErr = <-writer:
				break loop
			default:
			}
			res, err := Run(ctx, e.cat, e.indexes, e.id, Options{Align: e.alignFunc})
			switch {
			case err == nil && res.CommittedSnapshotID != 0:
				rewrites++
			case err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrIndexLags):
				<-writer
				t.Fatalf("v%d: rewrite while the writer upserts: %v", version, err)
			}
		}
		if writerErr != nil {
			t.Fatalf("v%d: writer: %v", version, writerErr)
		}
		if _, err := Run(ctx, e.cat, e.indexes, e.id, Options{Align: e.alignFunc}); err != nil {
			t.Fatalf("v%d: final rewrite: %v", version, err)
		}
		if rewrites == 0 {
			t.Fatalf("v%d: no rewrite committed while the writer ran", version)
		}
		tbl := e.reload()
		sameRows(t, "live rows and the writer's record", live.rows(t, tbl), scanRows(t, tbl))
		if n := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)); n != 0 {
			t.Fatalf("v%d: %d equality delete files are live after the final rewrite", version, n)
		}
		e.verifyIndex("pk")
	}
}
