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
	"github.com/streamidx/streamidx/ingest"
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

// An index follows a rewrite's snapshots without reading the table: the
// delta over them is empty and reads no file. A snapshot that carries the
// rewrite's property but appends rows is read as any other.
func TestDeltaTakesRewriteSnapshotsAtTheirWord(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	start(t, e)
	before := e.reload().CurrentSnapshot()
	if _, err := Run(ctx, e.cat, e.indexes, e.id, Options{}); err != nil {
		t.Fatal(err)
	}
	tbl := e.reload()
	md, _, err := e.indexes.Load(ctx, e.id, "pk")
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, tbl.Schema())
	if err != nil {
		t.Fatal(err)
	}
	delta := func(old, snap *table.Snapshot) (ingest.DeltaStats, int) {
		t.Helper()
		mutations := 0
		st, err := ingest.ComputeDelta(ctx, tbl, old, snap, is, ingest.DeltaOptions{}, func(format.Key, int) error {
			mutations++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return st, mutations
	}
	st, n := delta(before, tbl.CurrentSnapshot())
	if st.RewriteSnapshots != 2 || st.FilesScanned != 0 || st.EqualityKeyReads != 0 || n != 0 {
		t.Fatalf("delta over the rewrite: %d rewrite snapshots, %d files scanned, %d key reads, %d mutations; want 2 and nothing read",
			st.RewriteSnapshots, st.FilesScanned, st.EqualityKeyReads, n)
	}
	head := tbl.CurrentSnapshot()
	tbl, _ = testtables.AppendWithProperties(t, tbl, iceberg.Properties{snapshotProperty: "true"}, testtables.OrderRows(500, 510, 0)...)
	if st, n = delta(head, tbl.CurrentSnapshot()); st.RewriteSnapshots != 0 || n != 10 {
		t.Fatalf("delta over an append marked as a rewrite: %d rewrite snapshots, %d mutations; want 0 and the 10 rows", st.RewriteSnapshots, n)
	}
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	e.verifyIndex("pk")
}

// An equality delete whose keys lie outside a data file's key range
// deletes nothing there: the rewrite leaves that file alone and reads only
// the part of the index that holds the files it touches.
func TestRewriteSkipsDataFilesOutsideTheDeletesKeys(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	tbl, low := testtables.Append(t, e.tbl, testtables.OrderRows(0, 200, 0)...)
	tbl, high := testtables.Append(t, tbl, testtables.OrderRows(200, 400, 0)...)
	e.tbl = upsert(t, tbl, []int64{250, 260, 399}, 1)
	want := scanRows(t, e.tbl)
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, e.cat, e.indexes, e.id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.DataFiles) != 1 || res.DataFiles[0].Path != high[0].FilePath() || res.PositionsAdded != 3 {
		t.Fatalf("rewrite touched %v (%d positions); want only %s, 3 positions", res.DataFiles, res.PositionsAdded, high[0].FilePath())
	}
	if testtables.LiveDV(t, e.reload(), low[0].FilePath()) != nil {
		t.Fatalf("the data file of keys 0-199 got a deletion vector")
	}
	// 400 entries in all (the upserted orders' new versions replace the
	// old); the high file's 197 live rows and what shares their range
	// files and row groups are read, not the whole index.
	if res.IndexEntriesRead >= 300 {
		t.Fatalf("read %d index entries to find the live rows of one data file of 200", res.IndexEntriesRead)
	}
	sameRows(t, "scan after the rewrite", want, scanRows(t, e.reload()))
	if _, err := e.align(ctx, "pk"); err != nil {
		t.Fatal(err)
	}
	e.verifyIndex("pk")
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
