package rewrite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// history commits 50 upserts with equality deletes on id, with position
// deletes (v2) or deletion vectors, one replacing another (v3), on the
// first data files, a rewrite of two upserts' files, and, on a partitioned
// table (bucket(4, id) after the first appends), an equality delete file of
// the unpartitioned spec, which applies to every partition.
func history(t *testing.T, e *env, partitioned bool) *table.Table {
	t.Helper()
	tbl := e.tbl
	tbl, first := testtables.Append(t, tbl, testtables.OrderRows(0, 100, 0)...)
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(100, 200, 0)...)
	if partitioned {
		tbl = testtables.UpdateSpec(t, tbl, func(u *table.UpdateSpec) { u.AddField("id", iceberg.BucketTransform{NumBuckets: 4}, "id_bucket") })
	}
	r := rand.New(rand.NewPCG(7, 11))
	var rewritten []iceberg.DataFile
	var rewrittenIDs []int64
	for c := 1; c <= 50; c++ {
		var ids []int64
		for len(ids) < 4 {
			if id := r.Int64N(220); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		tbl = upsert(t, tbl, ids, c)
		switch c {
		case 12, 13:
			rewritten = append(rewritten, testtables.AddedFiles(t, tbl, iceberg.EntryContentData)...)
			rewrittenIDs = append(rewrittenIDs, ids...)
		case 10, 30:
			if tbl.Metadata().Version() >= 3 {
				tbl, _ = testtables.AddDV(t, tbl, first[0], int64(c), int64(c+1))
			} else {
				tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: first[0], Pos: []int64{int64(c), int64(c + 1)}})
			}
		case 20:
			var rows [][]any
			for _, id := range rewrittenIDs {
				rows = append(rows, testtables.OrderRow(int(id), 77))
			}
			tbl, _ = testtables.Rewrite(t, tbl, rewritten, rows...)
		case 40:
			if partitioned {
				del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(3)}, []any{int64(150)}, []any{int64(199)})
				tbl = testtables.CommitDeletes(t, tbl, del)
			}
		}
	}
	e.tbl = tbl
	return tbl
}

// rangeFiles lists the range files of an index's current snapshot.
func (e *env) rangeFiles(index string) []string {
	e.t.Helper()
	ctx := context.Background()
	md, _, err := e.indexes.Load(ctx, e.id, index)
	if err != nil {
		e.t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, e.reload().Schema())
	if err != nil {
		e.t.Fatal(err)
	}
	tr, _, err := objstore.Local().ReadTracking(ctx, md, md.CurrentSnapshot(), is)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, te := range tr.Entries {
		out = append(out, te.FilePath)
	}
	return out
}

// checkRewrite runs a rewrite on e's table and checks what a user would:
// the scan returns the same rows, no equality delete file is live, and
// both indexes follow the rewrite's snapshots without writing a byte,
// reusing every range file, and verify exactly.
func checkRewrite(t *testing.T, e *env) *Result {
	t.Helper()
	ctx := context.Background()
	tbl := e.reload()
	before := scanRows(t, tbl)
	eqFiles := len(testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes))
	if eqFiles == 0 {
		t.Fatal("the history left no equality delete file to rewrite")
	}
	for _, index := range []string{"pk", "by_customer"} {
		if _, err := e.align(ctx, index); err != nil {
			t.Fatal(err)
		}
	}
	pkFiles, byCustomerFiles := e.rangeFiles("pk"), e.rangeFiles("by_customer")

	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{Align: e.alignFunc})
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	tbl = e.reload()
	if res.CommittedSnapshotID != tbl.CurrentSnapshot().SnapshotID || res.Index != "pk" {
		t.Fatalf("rewrite committed snapshot %d through %q; the table is at %d", res.CommittedSnapshotID, res.Index, tbl.CurrentSnapshot().SnapshotID)
	}
	if res.EqualityFilesRemoved != eqFiles || res.PositionsAdded == 0 || res.DeleteFilesWritten == 0 {
		t.Fatalf("rewrite removed %d of %d equality delete files, added %d positions in %d files", res.EqualityFilesRemoved, eqFiles, res.PositionsAdded, res.DeleteFilesWritten)
	}
	if live := testtables.LiveFiles(t, tbl, iceberg.EntryContentEqDeletes); len(live) != 0 {
		t.Fatalf("%d equality delete files are still live", len(live))
	}
	if tbl.Metadata().Version() >= 3 {
		for _, df := range testtables.LiveFiles(t, tbl, iceberg.EntryContentPosDeletes) {
			if df.FileFormat() != iceberg.PuffinFile {
				t.Fatalf("v3 table has position delete file %s", df.FilePath())
			}
		}
	}
	sameRows(t, "scan before and after the rewrite", before, scanRows(t, tbl))

	// pk was brought up to the rewrite by Run; by_customer follows now.
	pubs, err := e.align(ctx, "by_customer")
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) == 0 {
		t.Fatal("by_customer published no snapshot for the rewrite")
	}
	for _, p := range pubs {
		if p.FullBuild || p.StagedMutations != 0 || p.FilesWritten != 0 || p.BytesWritten != 0 || p.EqualitySlowPathFiles != 0 {
			t.Fatalf("index snapshot of rewrite snapshot %d: full build %v, %d mutations, %d files and %d bytes written, %d slow-path files",
				p.SourceSnapshotID, p.FullBuild, p.StagedMutations, p.FilesWritten, p.BytesWritten, p.EqualitySlowPathFiles)
		}
	}
	if got := e.rangeFiles("pk"); !slices.Equal(got, pkFiles) {
		t.Fatalf("pk's index snapshot of the rewrite has range files %v, before %v", got, pkFiles)
	}
	if got := e.rangeFiles("by_customer"); !slices.Equal(got, byCustomerFiles) {
		t.Fatalf("by_customer's index snapshot of the rewrite has range files %v, before %v", got, byCustomerFiles)
	}
	e.verifyIndex("pk")
	e.verifyIndex("by_customer")
	return res
}

func TestRewriteAfterUpserts(t *testing.T) {
	for _, tc := range []struct {
		version     int
		partitioned bool
	}{{2, false}, {3, false}, {2, true}, {3, true}} {
		name := fmt.Sprintf("v%d", tc.version)
		if tc.partitioned {
			name += "-partitioned"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.version)
			history(t, e, tc.partitioned)
			checkRewrite(t, e)

			// More upserts on top of the rewrite, and on v3 a writer's
			// deletion vector replacing one the rewrite wrote: the next
			// rewrite replaces the rewrite's own deletes.
			tbl := e.reload()
			for c := 51; c <= 55; c++ {
				tbl = upsert(t, tbl, []int64{int64(c), int64(c * 3 % 200), 210}, c)
			}
			if tbl.Metadata().Version() >= 3 {
				first := testtables.LiveFiles(t, tbl, iceberg.EntryContentData)[0]
				tbl, _ = testtables.AddDV(t, tbl, first, 0)
			}
			e.tbl = tbl
			checkRewrite(t, e)

			res, err := Run(context.Background(), e.cat, e.indexes, e.id, Options{Align: e.alignFunc})
			if err != nil || res.Skipped != "no live equality delete files" || res.CommittedSnapshotID != 0 {
				t.Fatalf("a rewrite with nothing to do: %+v, %v", res, err)
			}
		})
	}
}

// alignedHistory is a v3 table after the upserts of history, with pk
// aligned to it, and the table's head.
func alignedHistory(t *testing.T) (*env, int64) {
	t.Helper()
	e := newEnv(t, 3)
	history(t, e, false)
	if _, err := e.align(context.Background(), "pk"); err != nil {
		t.Fatal(err)
	}
	return e, e.reload().CurrentSnapshot().SnapshotID
}

func TestRewriteDryRun(t *testing.T) {
	ctx := context.Background()
	e, head := alignedHistory(t)
	dry, err := Run(ctx, e.cat, e.indexes, e.id, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if e.reload().CurrentSnapshot().SnapshotID != head || dry.CommittedSnapshotID != 0 {
		t.Fatal("the dry run committed")
	}
	eqFiles := testtables.LiveFiles(t, e.tbl, iceberg.EntryContentEqDeletes)
	if len(dry.EqualityFiles) != len(eqFiles) {
		t.Fatalf("dry run lists %d equality delete files, the table has %d", len(dry.EqualityFiles), len(eqFiles))
	}
	touched := 0
	for _, f := range dry.EqualityFiles {
		if f.Rows == 0 {
			t.Fatalf("equality delete file %s: 0 rows resolved", f.Path)
		}
		touched += f.DataFilesTouched
	}
	var sum int64
	for _, f := range dry.DataFiles {
		sum += f.PositionsAdded
	}
	if touched == 0 || sum != dry.PositionsAdded || sum == 0 {
		t.Fatalf("dry run: %d data files touched, positions %d of %d", touched, sum, dry.PositionsAdded)
	}
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PositionsAdded != dry.PositionsAdded || len(res.DataFiles) != len(dry.DataFiles) {
		t.Fatalf("the rewrite added %d positions in %d files, the dry run said %d in %d",
			res.PositionsAdded, len(res.DataFiles), dry.PositionsAdded, len(dry.DataFiles))
	}
}

// TestRewriteGivesWay: a rewrite told to give way after planning writes
// and commits nothing; asked again without, it commits.
func TestRewriteGivesWay(t *testing.T) {
	ctx := context.Background()
	e, head := alignedHistory(t)
	asked := 0
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{GiveWay: func() bool { asked++; return true }})
	if !errors.Is(err, ErrGaveWay) || asked != 1 {
		t.Fatalf("rewrite that gives way: %v, asked %d times", err, asked)
	}
	if e.reload().CurrentSnapshot().SnapshotID != head || res.CommittedSnapshotID != 0 || res.DeleteFilesWritten != 0 {
		t.Fatalf("the rewrite that gave way changed the table or wrote %d files", res.DeleteFilesWritten)
	}
	res, err = Run(ctx, e.cat, e.indexes, e.id, Options{GiveWay: func() bool { return false }})
	if err != nil || res.CommittedSnapshotID == 0 {
		t.Fatalf("rewrite that need not give way: %v, committed %d", err, res.CommittedSnapshotID)
	}
}

func TestRewriteRefusesLaggingIndex(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 2)
	tbl, _ := testtables.Append(t, e.tbl, testtables.OrderRows(0, 50, 0)...)
	e.tbl = tbl
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	tbl = upsert(t, tbl, []int64{1, 2}, 1)
	upsert(t, tbl, []int64{3}, 2)
	_, err := Run(ctx, e.cat, e.indexes, e.id, Options{})
	if !errors.Is(err, ErrIndexLags) || !strings.Contains(err.Error(), "2 snapshots ahead") {
		t.Fatalf("rewrite through a lagging index: %v", err)
	}
	_, err = Run(ctx, e.cat, e.indexes, e.id, Options{Index: "by_customer"})
	if !errors.Is(err, ErrNoLocationIndex) {
		t.Fatalf("rewrite through an index without row locations: %v", err)
	}
}
