package rewrite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/lineage"
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

// checkRewritten checks that the table scans as the writer's record, that
// wantEq equality delete files are live, and that the index, brought up to
// the table, is exact.
func (e *env) checkRewritten(live liveRecord, wantEq int) {
	e.t.Helper()
	tbl := e.reload()
	sameRows(e.t, "live rows and the writer's record", live.rows(e.t, tbl), scanRows(e.t, tbl))
	if n := len(testtables.LiveFiles(e.t, tbl, iceberg.EntryContentEqDeletes)); n != wantEq {
		e.t.Fatalf("%d equality delete files are live; want %d", n, wantEq)
	}
	if _, err := e.align(context.Background(), "pk"); err != nil {
		e.t.Fatal(err)
	}
	e.verifyIndex("pk")
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
	e.checkRewritten(live, 1)
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
	e.checkRewritten(live, 0)
}

// With AtIndexed, a rewrite plans on the table snapshot the index covers
// when a writer has committed since: the writer's upsert touches nothing
// the plan changes, so the rewrite commits on the writer's snapshot without
// bringing the index up, and keeps the writer's equality delete.
func TestRewriteAtIndexedPlansOnTheIndexedSnapshot(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	live, _ := start(t, e)
	indexed := e.tbl.CurrentSnapshot().SnapshotID
	upsert(t, e.reload(), []int64{5, 150}, 20)
	live[5], live[150] = 20, 20
	writer := e.reload().CurrentSnapshot().SnapshotID
	if _, err := Run(ctx, e.cat, e.indexes, e.id, Options{}); !errors.Is(err, ErrIndexLags) {
		t.Fatalf("rewrite without AtIndexed through the lagging index: %v; want ErrIndexLags", err)
	}
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{AtIndexed: true})
	if err != nil {
		t.Fatal(err)
	}
	tbl := e.reload()
	if res.SnapshotID != indexed || res.CommittedSnapshotID == 0 || !lineageHas(tbl, writer) {
		t.Fatalf("planned on %d (indexed %d), committed %d; the writer's snapshot %d must stay in the lineage",
			res.SnapshotID, indexed, res.CommittedSnapshotID, writer)
	}
	sameRows(t, "live rows and the writer's record", live.rows(t, tbl), scanRows(t, tbl))
	if n := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)); n != 1 {
		t.Fatalf("%d equality delete files are live; want the writer's one", n)
	}
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	e.verifyIndex("pk")
}

// With AtIndexed, a writer's delete since the indexed snapshot in a data
// file the plan writes a deletion vector for only deletes more: the
// rewrite's vector takes the writer's positions in and replaces the
// writer's, on the first plan.
func TestRewriteAtIndexedTakesInAWritersNewDeletes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	live, first := start(t, e)
	testtables.AddDV(t, e.reload(), first, 199) // order 199 of the first append
	delete(live, 199)
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{AtIndexed: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 1 || res.CommittedSnapshotID == 0 || res.DeleteFilesReplaced != 1 {
		t.Fatalf("rewrite: %d plans, committed %d, %d delete files replaced; want one plan committed, replacing the writer's vector",
			res.Attempts, res.CommittedSnapshotID, res.DeleteFilesReplaced)
	}
	e.checkRewritten(live, 0)
}

// With AtIndexed, a writer's snapshot since the indexed one that replaced
// a deletion vector of a data file the plan writes one for (a removed
// delete file: not only more deletes) is refused as a lag before anything
// is written; once the index has caught up, the rewrite commits.
func TestRewriteAtIndexedRefusesWhatTheHeadContradicts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	live, first := start(t, e)
	testtables.AddDV(t, e.reload(), first, 198)
	delete(live, 198)
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	testtables.AddDV(t, e.reload(), first, 199) // replaces the vector of 198
	delete(live, 199)
	head := e.reload().CurrentSnapshot().SnapshotID
	dvs := len(testtables.LiveFiles(t, e.tbl, iceberg.EntryContentPosDeletes))
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{AtIndexed: true})
	if !errors.Is(err, ErrIndexLags) || !strings.Contains(err.Error(), "was removed") {
		t.Fatalf("rewrite planned on a snapshot the head contradicts: %v; want ErrIndexLags naming the replaced vector", err)
	}
	if tbl := e.reload(); tbl.CurrentSnapshot().SnapshotID != head || res.DeleteFilesWritten != 0 {
		t.Fatalf("the refused rewrite committed or wrote %d files", res.DeleteFilesWritten)
	}
	if got := len(testtables.LiveFiles(t, e.tbl, iceberg.EntryContentPosDeletes)); got != dvs {
		t.Fatalf("%d position delete files live after the refused rewrite, %d before", got, dvs)
	}
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, e.cat, e.indexes, e.id, Options{AtIndexed: true}); err != nil {
		t.Fatalf("rewrite once the index caught up: %v", err)
	}
	tbl := e.reload()
	sameRows(t, "live rows and the writer's record", live.rows(t, tbl), scanRows(t, tbl))
	if n := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes)); n != 0 {
		t.Fatalf("%d equality delete files are live", n)
	}
}

// With AtIndexed, an index that lags behind an earlier rewrite (an index
// updated one snapshot at a time, policy every) still lets the next
// rewrite through: it leaves the equality deletes that rewrite removed,
// takes the rest, and writes each data file's position deletes over the
// earlier rewrite's (a deletion vector on v3, a position delete file on
// v2), keeping their positions.
func TestRewriteAtIndexedFollowsAnEarlierRewrite(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { rewriteFollowsAnEarlierRewrite(t, version) })
	}
}

func rewriteFollowsAnEarlierRewrite(t *testing.T, version int) {
	ctx := context.Background()
	e := newEnv(t, version)
	live, _ := start(t, e)
	u := e.updater("pk")
	step := func() {
		t.Helper()
		if _, err := u.Step(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	upsert(t, e.reload(), []int64{5, 150}, 20)
	live[5], live[150] = 20, 20
	upsert(t, e.reload(), []int64{7, 160}, 21)
	live[7], live[160] = 21, 21
	step() // the index covers the first of the two upserts
	first, err := Run(ctx, e.cat, e.indexes, e.id, Options{AtIndexed: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(testtables.LiveFiles(t, e.reload(), iceberg.EntryContentEqDeletes)); first.CommittedSnapshotID == 0 || n != 1 {
		t.Fatalf("first rewrite committed %d and left %d equality delete files; want the last upsert's one", first.CommittedSnapshotID, n)
	}
	step() // the index covers the last upsert, before the first rewrite
	second, err := Run(ctx, e.cat, e.indexes, e.id, Options{AtIndexed: true})
	if err != nil {
		t.Fatalf("a rewrite planned before the first rewrite's commit: %v", err)
	}
	// On v2 the earlier position delete file stays when it names data
	// files the second rewrite does not write for.
	if second.Attempts != 1 || second.EqualityFilesRemoved != 1 || (version == 3 && second.DeleteFilesReplaced == 0) {
		t.Fatalf("second rewrite: %d plans, %d equality files removed, %d delete files replaced; want one plan removing the last "+
			"upsert's file and replacing the first rewrite's deletes", second.Attempts, second.EqualityFilesRemoved, second.DeleteFilesReplaced)
	}
	e.checkRewritten(live, 0)
}

// lineageHas reports whether snapshot id is the head of tbl or an ancestor.
func lineageHas(tbl *table.Table, id int64) bool {
	return lineage.IsAncestor(tbl, tbl.CurrentSnapshot().SnapshotID, id)
}

// A writer commits upserts as fast as it can while rewrites run one after
// another: afterwards the table's live rows are what the writer recorded.
// The rewrites either bring the index up themselves (Align) or, as in the
// daemon, plan on what the index covers (AtIndexed) while another
// goroutine keeps the index up to the table.
func TestRewriteWhileWriterUpserts(t *testing.T) {
	for _, version := range []int{2, 3} {
		for _, atIndexed := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d/at-indexed=%v", version, atIndexed), func(t *testing.T) {
				rewriteWhileWriterUpserts(t, version, atIndexed)
			})
		}
	}
}

func rewriteWhileWriterUpserts(t *testing.T, version int, atIndexed bool) {
	ctx := context.Background()
	e := newEnv(t, version)
	live, _ := start(t, e)
	writer := make(chan error, 1)
	var committed atomic.Bool // a rewrite committed while the writer ran
	go func() {
		r := rand.New(rand.NewPCG(3, 4))
		tbl := e.tbl
		// 30 commits, then, when no rewrite has committed among them (each
		// met a commit), a wait for one and a last commit after it: a
		// rewrite that never committed proves nothing.
		for c := 100; c <= 130; c++ {
			if c == 130 {
				for deadline := time.Now().Add(2 * time.Minute); !committed.Load() && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
			}
			ids := []int64{r.Int64N(200), r.Int64N(200) + 200}
			var err error
			if tbl, err = testtables.UpsertRetrying(e.cat, tbl, ids, c); err != nil {
				writer <- err
				return
			}
			for _, id := range ids {
				live[id] = c
			}
			time.Sleep(15 * time.Millisecond) // room for rewrites between commits
		}
		writer <- nil
	}()
	opts := Options{Align: e.alignFunc}
	stopAligner, aligner := make(chan struct{}), make(chan error, 1)
	if atIndexed {
		opts = Options{AtIndexed: true}
		go func() {
			for {
				select {
				case <-stopAligner:
					aligner <- nil
					return
				default:
				}
				if _, err := e.align(ctx, "pk"); err != nil && !errors.Is(err, table.ErrCommitFailed) {
					aligner <- err
					return
				}
			}
		}()
	} else {
		aligner <- nil
	}
	rewrites, behind := 0, 0 // behind: planned on an older snapshot than the one committed on
	var writerErr error
loop:
	for {
		select {
		case writerErr = <-writer:
			break loop
		default:
		}
		res, err := Run(ctx, e.cat, e.indexes, e.id, opts)
		switch {
		case err == nil && res.CommittedSnapshotID != 0:
			rewrites++
			committed.Store(true)
			if tbl := e.reload(); !plannedOnParent(tbl, res) {
				behind++
			}
		case err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrIndexLags):
			<-writer
			t.Fatalf("rewrite while the writer upserts: %v", err)
		}
	}
	close(stopAligner)
	if err := <-aligner; err != nil {
		t.Fatalf("index updates beside the rewrites: %v", err)
	}
	if writerErr != nil {
		t.Fatalf("writer: %v", writerErr)
	}
	if _, err := Run(ctx, e.cat, e.indexes, e.id, Options{Align: e.alignFunc}); err != nil {
		t.Fatalf("final rewrite: %v", err)
	}
	// A final rewrite with nothing left to do does not align the index.
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	if rewrites == 0 {
		t.Fatal("no rewrite committed while the writer ran")
	}
	t.Logf("%d rewrites committed while the writer ran, %d of them on a newer snapshot than planned on", rewrites, behind)
	e.checkRewritten(live, 0)
}

// plannedOnParent reports whether the rewrite res committed directly on
// the snapshot it planned on (its one or two snapshots descend from it with
// no other writer's in between).
func plannedOnParent(tbl *table.Table, res *Result) bool {
	s := tbl.SnapshotByID(res.CommittedSnapshotID)
	for range 2 {
		if s == nil || s.ParentSnapshotID == nil {
			return false
		}
		if *s.ParentSnapshotID == res.SnapshotID {
			return true
		}
		if s = tbl.SnapshotByID(*s.ParentSnapshotID); s == nil || s.Summary == nil || s.Summary.Properties[snapshotProperty] != "true" {
			return false
		}
	}
	return false
}
