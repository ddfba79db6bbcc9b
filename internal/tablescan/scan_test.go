package tablescan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/testtables"
)

func newTable(t *testing.T, version int, spec *iceberg.PartitionSpec) *table.Table {
	t.Helper()
	cat, _ := testtables.NewCatalog(t)
	return testtables.CreateTable(t, cat, testtables.TableConfig{
		Name: "t", Schema: testSchema(), FormatVersion: version, Spec: spec, RowGroupRows: 2,
	})
}

func TestScanAppends(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			tbl := newTable(t, version, nil)
			first := [][]any{r(1, "a", 1.5), r(2, nil, 2.5), r(3, "c", 3.5)}
			tbl, a := testtables.Append(t, tbl, first...)
			s1 := tbl.CurrentSnapshot()
			rows := special()
			tbl, b := testtables.AppendWithTransaction(t, tbl, rows...)
			s2 := tbl.CurrentSnapshot()
			if len(a) != 1 || len(b) != 1 {
				t.Fatalf("appends wrote %d and %d files, want 1 each", len(a), len(b))
			}
			// Positions must carry over row group boundaries.
			if n := rowGroups(t, tbl, b[0].FilePath()); n != 2 {
				t.Fatalf("a file of 4 rows has %d row groups, want 2", n)
			}

			var s1Rows []liveRow
			for i, row := range first {
				s1Rows = append(s1Rows, want(a[0], int64(i), row))
			}
			checkRows(t, tbl, s1, s1Rows...)
			all := s1Rows
			for i, row := range rows {
				all = append(all, want(b[0], int64(i), row))
			}
			checkRows(t, tbl, s2, all...)
		})
	}
}

func TestScanEmptyTable(t *testing.T) {
	tbl := newTable(t, 2, nil)
	called := false
	stats, err := Scan(context.Background(), tbl, tbl.CurrentSnapshot(), Options{}, func(arrow.RecordBatch) error {
		called = true
		return nil
	})
	if err != nil || called || stats.DataFiles != 0 {
		t.Fatalf("scan of a table without snapshots: stats %+v, called %v, err %v", stats, called, err)
	}
}

func TestScanPositionDeletes(t *testing.T) {
	tbl := newTable(t, 2, nil)
	rowsA := [][]any{r(1, "a", 1), r(2, "b", 2), r(3, "c", 3), r(4, "d", 4), r(5, "e", 5)}
	rowsB := [][]any{r(6, "f", 6), r(7, "g", 7), r(8, "h", 8)}
	tbl, a := testtables.Append(t, tbl, rowsA...)
	tbl, b := testtables.Append(t, tbl, rowsB...)
	// One delete file for both data files (no referenced_data_file), one
	// for A alone (referenced_data_file set).
	tbl, shared := testtables.AddPositionDeletes(t, tbl,
		testtables.Positions{File: a[0], Pos: []int64{0, 3}},
		testtables.Positions{File: b[0], Pos: []int64{2}})
	if shared.ReferencedDataFile() != nil {
		t.Fatal("a delete file for two data files names one")
	}
	s1 := tbl.CurrentSnapshot()
	tbl, single := testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: a[0], Pos: []int64{3, 4}})
	if single.ReferencedDataFile() == nil {
		t.Fatal("a delete file for one data file does not name it")
	}
	s2 := tbl.CurrentSnapshot()
	tbl, c := testtables.Append(t, tbl, r(9, "i", 9))
	s3 := tbl.CurrentSnapshot()

	checkRows(t, tbl, s1,
		want(a[0], 1, rowsA[1]), want(a[0], 2, rowsA[2]), want(a[0], 4, rowsA[4]),
		want(b[0], 0, rowsB[0]), want(b[0], 1, rowsB[1]))
	checkRows(t, tbl, s2,
		want(a[0], 1, rowsA[1]), want(a[0], 2, rowsA[2]),
		want(b[0], 0, rowsB[0]), want(b[0], 1, rowsB[1]))
	checkRows(t, tbl, s3,
		want(a[0], 1, rowsA[1]), want(a[0], 2, rowsA[2]),
		want(b[0], 0, rowsB[0]), want(b[0], 1, rowsB[1]),
		want(c[0], 0, r(9, "i", 9)))
}

func TestScanDeletionVectors(t *testing.T) {
	tbl := newTable(t, 3, nil)
	rowsA := [][]any{r(1, "a", 1), r(2, "b", 2), r(3, "c", 3), r(4, "d", 4), r(5, "e", 5), r(6, "f", 6)}
	rowsB := [][]any{r(7, "g", 7), r(8, "h", 8)}
	tbl, a := testtables.Append(t, tbl, rowsA...)
	tbl, b := testtables.Append(t, tbl, rowsB...)
	tbl, dv1 := testtables.AddDV(t, tbl, a[0], 1, 4)
	s1 := tbl.CurrentSnapshot()
	tbl, dv2 := testtables.AddDV(t, tbl, a[0], 5)
	s2 := tbl.CurrentSnapshot()
	if live := testtables.LiveDV(t, tbl, a[0].FilePath()); live == nil || live.FilePath() != dv2.FilePath() || dv2.FilePath() == dv1.FilePath() {
		t.Fatalf("the second deletion vector did not replace the first")
	}
	tbl, _ = testtables.AddDV(t, tbl, b[0], 0)
	s3 := tbl.CurrentSnapshot()

	checkRows(t, tbl, s1,
		want(a[0], 0, rowsA[0]), want(a[0], 2, rowsA[2]), want(a[0], 3, rowsA[3]), want(a[0], 5, rowsA[5]),
		want(b[0], 0, rowsB[0]), want(b[0], 1, rowsB[1]))
	// The replacing vector holds the old positions and the new one.
	checkRows(t, tbl, s2,
		want(a[0], 0, rowsA[0]), want(a[0], 2, rowsA[2]), want(a[0], 3, rowsA[3]),
		want(b[0], 0, rowsB[0]), want(b[0], 1, rowsB[1]))
	checkRows(t, tbl, s3,
		want(a[0], 0, rowsA[0]), want(a[0], 2, rowsA[2]), want(a[0], 3, rowsA[3]),
		want(b[0], 1, rowsB[1]))

	ix, err := PlanDeletes(context.Background(), tbl, s2)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 1 {
		t.Errorf("snapshot with a replaced deletion vector has %d live delete files, want 1", ix.Len())
	}
}

func TestScanEqualityDeletes(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			tbl := newTable(t, version, nil)
			rowsA := [][]any{r(1, "a", 1), r(2, "b", 2), r(3, nil, 3), r(4, "d", 4), r(5, "e", 5)}
			rowsA = append(rowsA, special()...)
			tbl, a := testtables.Append(t, tbl, rowsA...) // seq 1
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(2)})
			s1 := tbl.CurrentSnapshot() // seq 2: id 2 of A is gone

			re2 := r(2, "b again", 20)
			tbl, b := testtables.Append(t, tbl, re2) // seq 3: id 2 is back
			s2 := tbl.CurrentSnapshot()

			// seq 4: an upsert of id 4: the delete removes the old row, not
			// the new one of the same sequence number.
			del4 := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(4)})
			re4 := r(4, "d again", 40)
			tbl, c := testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del4}, re4)
			s3 := tbl.CurrentSnapshot()

			// seq 5 to 7: deletes on other fields: a null name (null equals
			// null), a null or -0.01 decimal, and a pair of fields.
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{nil})
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{6}, []any{nil}, []any{decimal128.FromI64(-1)})
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{2, 1}, []any{"e", int64(5)}, []any{"b again", int64(99)})
			s4 := tbl.CurrentSnapshot()

			base := []liveRow{want(a[0], 0, rowsA[0]), want(a[0], 2, rowsA[2]), want(a[0], 4, rowsA[4])}
			specialRows := []liveRow{want(a[0], 5, rowsA[5]), want(a[0], 6, rowsA[6]), want(a[0], 7, rowsA[7]), want(a[0], 8, rowsA[8])}
			checkRows(t, tbl, s1, append(append([]liveRow{want(a[0], 3, rowsA[3])}, base...), specialRows...)...)
			checkRows(t, tbl, s2, append(append([]liveRow{want(a[0], 3, rowsA[3]), want(b[0], 0, re2)}, base...), specialRows...)...)
			checkRows(t, tbl, s3, append(append([]liveRow{want(b[0], 0, re2), want(c[0], 0, re4)}, base...), specialRows...)...)
			// Gone at s4: id 3 (null name), 100 (null name and amount), 101
			// (amount -0.01), 5 (name e, id 5).
			checkRows(t, tbl, s4,
				want(a[0], 0, rowsA[0]), want(a[0], 7, rowsA[7]), want(a[0], 8, rowsA[8]),
				want(b[0], 0, re2), want(c[0], 0, re4))
		})
	}
}

func TestScanEqualityDeletePartitionScope(t *testing.T) {
	tbl := newTable(t, 2, nil)
	tbl, a := testtables.Append(t, tbl, rc(1, "a1", "x"), rc(2, "a2", "y"), rc(3, "a3", "x")) // spec 0, unpartitioned
	tbl = testtables.UpdateSpec(t, tbl, func(u *table.UpdateSpec) { u.AddIdentity("cat") })
	spec := tbl.Spec()
	if spec.ID() != 1 {
		t.Fatalf("new spec has id %d, want 1", spec.ID())
	}
	partField := spec.Field(0).FieldID
	tbl, bx := testtables.Append(t, tbl, rc(1, "x1", "x"), rc(2, "x2", "x"), rc(3, "x3", "x"))
	tbl, by := testtables.Append(t, tbl, rc(1, "y1", "y"), rc(2, "y2", "y"), rc(3, "y3", "y"))
	if len(bx) != 1 || len(by) != 1 || bx[0].SpecID() != 1 {
		t.Fatalf("partitioned appends wrote %d and %d files", len(bx), len(by))
	}

	// An equality delete of partition cat=x of spec 1 applies only there.
	scoped := testtables.WriteEqualityDeleteFile(t, tbl, 1, map[int]any{partField: "x"}, []int{1}, []any{int64(1)})
	tbl = testtables.CommitDeletes(t, tbl, scoped)
	s1 := tbl.CurrentSnapshot()
	// An equality delete of the unpartitioned spec applies everywhere.
	global := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(2)})
	tbl = testtables.CommitDeletes(t, tbl, global)
	s2 := tbl.CurrentSnapshot()
	// iceberg-go's writer routes rows of a partitioned table by partition.
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1, 7}, []any{int64(3), "y"})
	s3 := tbl.CurrentSnapshot()

	rowA := [][]any{rc(1, "a1", "x"), rc(2, "a2", "y"), rc(3, "a3", "x")}
	rowX := [][]any{rc(1, "x1", "x"), rc(2, "x2", "x"), rc(3, "x3", "x")}
	rowY := [][]any{rc(1, "y1", "y"), rc(2, "y2", "y"), rc(3, "y3", "y")}
	checkRows(t, tbl, s1,
		want(a[0], 0, rowA[0]), want(a[0], 1, rowA[1]), want(a[0], 2, rowA[2]),
		want(bx[0], 1, rowX[1]), want(bx[0], 2, rowX[2]),
		want(by[0], 0, rowY[0]), want(by[0], 1, rowY[1]), want(by[0], 2, rowY[2]))
	checkRows(t, tbl, s2,
		want(a[0], 0, rowA[0]), want(a[0], 2, rowA[2]),
		want(bx[0], 2, rowX[2]),
		want(by[0], 0, rowY[0]), want(by[0], 2, rowY[2]))
	// The (id, cat) = (3, y) delete sits in partition cat=y: a3 has cat x
	// anyway, and x3 is in the other partition.
	checkRows(t, tbl, s3,
		want(a[0], 0, rowA[0]), want(a[0], 2, rowA[2]),
		want(bx[0], 2, rowX[2]),
		want(by[0], 0, rowY[0]))
}

func TestScanRewrite(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			tbl := newTable(t, version, nil)
			rowsA := [][]any{r(1, "a", 1), r(2, "b", 2), r(3, "c", 3), r(4, "d", 4)}
			tbl, a := testtables.Append(t, tbl, rowsA...)
			tbl, b := testtables.Append(t, tbl, r(5, "e", 5))
			if version == 3 {
				tbl, _ = testtables.AddDV(t, tbl, a[0], 1)
			} else {
				tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: a[0], Pos: []int64{1}})
			}
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(3)})
			s1 := tbl.CurrentSnapshot()
			// The rewrite keeps A's live rows; it also carries a row of key 3,
			// which the older equality delete must not remove from the new
			// file (its sequence number is higher).
			rewritten := [][]any{r(1, "a", 1), r(4, "d", 4), r(3, "c new", 33)}
			tbl, n := testtables.Rewrite(t, tbl, a, rewritten...)
			s2 := tbl.CurrentSnapshot()
			if s2.Summary == nil || s2.Summary.Operation != table.OpReplace {
				t.Errorf("rewrite snapshot operation is %v, want replace", s2.Summary)
			}

			checkRows(t, tbl, s1, want(a[0], 0, rowsA[0]), want(a[0], 3, rowsA[3]), want(b[0], 0, r(5, "e", 5)))
			checkRows(t, tbl, s2,
				want(n[0], 0, rewritten[0]), want(n[0], 1, rewritten[1]), want(n[0], 2, rewritten[2]),
				want(b[0], 0, r(5, "e", 5)))
		})
	}
}

func TestScanProjection(t *testing.T) {
	tbl := newTable(t, 2, nil)
	rows := [][]any{r(1, "a", 1), r(2, "b", 2), r(3, "c", 3)}
	tbl, a := testtables.Append(t, tbl, rows...)
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{"b"})
	ctx := context.Background()

	// The equality field (name) is not projected and still applies.
	opts := Options{Columns: []int{format.FieldIDPos, 3, format.FieldIDFile, 1}}
	var got []string
	var schema *arrow.Schema
	_, err := Scan(ctx, tbl, tbl.CurrentSnapshot(), opts, func(rec arrow.RecordBatch) error {
		schema = rec.Schema()
		for i := range int(rec.NumRows()) {
			got = append(got, fmt.Sprintf("%v %v %v %v", format.ValueAt(rec.Column(0), i), format.ValueAt(rec.Column(1), i),
				shortPath(format.ValueAt(rec.Column(2), i).(string)), format.ValueAt(rec.Column(3), i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	file := shortPath(a[0].FilePath())
	wantRows := []string{"0 1 " + file + " 1", "2 3 " + file + " 3"}
	if fmt.Sprint(got) != fmt.Sprint(wantRows) {
		t.Errorf("projected rows %q, want %q", got, wantRows)
	}
	wantSchema, err := table.SchemaToArrowSchema(iceberg.NewSchema(0,
		iceberg.NestedField{ID: format.FieldIDPos, Name: "_pos", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 3, Name: "price", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: format.FieldIDFile, Name: "_file", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if schema == nil || !schema.Equal(wantSchema) {
		t.Errorf("projected schema\n%v\nwant\n%v", schema, wantSchema)
	}
	for i, f := range schema.Fields() {
		if !f.Metadata.Equal(wantSchema.Field(i).Metadata) {
			t.Errorf("field %s metadata %v, want %v", f.Name, f.Metadata, wantSchema.Field(i).Metadata)
		}
	}

	// Only the row location: positions still count the rows.
	var locs []int64
	_, err = Scan(ctx, tbl, tbl.CurrentSnapshot(), Options{Columns: []int{format.FieldIDPos}}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			locs = append(locs, format.ValueAt(rec.Column(0), i).(int64))
		}
		return nil
	})
	if err != nil || fmt.Sprint(locs) != "[0 2]" {
		t.Errorf("positions %v (err %v), want [0 2]", locs, err)
	}

	for _, bad := range [][]int{{99}, {format.FieldIDSpecID}, {format.FieldIDPos, format.FieldIDPos}} {
		o := Options{Columns: bad}
		if err := o.Validate(tbl.Schema()); err == nil {
			t.Errorf("columns %v: no error", bad)
		}
	}
}

func TestScanSchemaEvolution(t *testing.T) {
	tbl := newTable(t, 2, nil)
	old := [][]any{r(1, "a", 1), r(2, nil, 2)}
	tbl, a := testtables.Append(t, tbl, old...)
	tbl = testtables.UpdateSchema(t, tbl, func(u *table.UpdateSchema) {
		u.RenameColumn([]string{"name"}, "label")
		u.AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil)
	})
	newRow := append(r(3, "c", 3), "hello")
	tbl, b := testtables.Append(t, tbl, newRow)
	// An equality delete on the renamed column applies to the old file.
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{"a"})

	got := scanAll(t, tbl, tbl.CurrentSnapshot())
	types := []iceberg.Type{}
	for _, f := range tbl.Schema().Fields() {
		types = append(types, f.Type)
	}
	oldRow := append(old[1], nil) // the new column reads as null in the old file
	expected := []liveRow{
		{File: a[0].FilePath(), Pos: 1, ID: 2, Values: renderRow(types, oldRow)},
		{File: b[0].FilePath(), Pos: 0, ID: 3, Values: renderRow(types, newRow)},
	}
	sortRows(expected)
	if fmt.Sprint(got) != fmt.Sprint(expected) {
		t.Errorf("live rows\n got  %v\n want %v", got, expected)
	}
	checkPositions(t, tbl, got)
	checkAgainstIceberg(t, tbl, tbl.CurrentSnapshot(), got)
}

// TestScanFilesWithoutFieldIDs reads a file another tool wrote without
// Parquet field IDs through the table's name mapping, also after a rename.
func TestScanFilesWithoutFieldIDs(t *testing.T) {
	tbl := newTable(t, 2, nil)
	rows := [][]any{r(1, "a", 1), r(2, "b", 2), r(3, nil, 3)}
	tbl, added := testtables.AddFiles(t, tbl, rows...)
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(2)})
	s1 := tbl.CurrentSnapshot()
	if tbl.NameMapping() == nil {
		t.Fatal("add files set no name mapping")
	}
	checkRows(t, tbl, s1, want(added, 0, rows[0]), want(added, 2, rows[2]))

	tbl = testtables.UpdateSchema(t, tbl, func(u *table.UpdateSchema) { u.RenameColumn([]string{"name"}, "label") })
	got := scanAll(t, tbl, tbl.CurrentSnapshot())
	if len(got) != 2 || got[0].Values != want(added, 0, rows[0]).Values {
		t.Errorf("after renaming a column of a file without field IDs: %v", got)
	}
}

// TestScanFileMatchesScan drives the per-file entry point the way the table
// delta does: plan the deletes, then scan each data file.
func TestScanFileMatchesScan(t *testing.T) {
	tbl := newTable(t, 3, nil)
	tbl, a := testtables.Append(t, tbl, r(1, "a", 1), r(2, "b", 2), r(3, "c", 3))
	tbl, b := testtables.Append(t, tbl, r(4, "d", 4), r(5, "e", 5))
	tbl, _ = testtables.AddDV(t, tbl, a[0], 0)
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(5)}, []any{int64(3)})
	tbl, c := testtables.Append(t, tbl, r(5, "e again", 50))
	snap := tbl.CurrentSnapshot()
	ctx := context.Background()

	ix, err := PlanDeletes(ctx, tbl, snap)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seqOf := map[string]int64{}
	for _, df := range []iceberg.DataFile{a[0], b[0], c[0]} {
		seqOf[df.FilePath()] = -1
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	var files []iceberg.DataFile
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			seqOf[e.DataFile().FilePath()] = e.SequenceNum()
			files = append(files, e.DataFile())
		}
	}
	if n := len(ix.Applicable(c[0], seqOf[c[0].FilePath()])); n != 0 {
		t.Errorf("%d delete files apply to the newest data file, want 0", n)
	}
	if n := len(ix.Applicable(a[0], seqOf[a[0].FilePath()])); n != 2 {
		t.Errorf("%d delete files apply to the first data file, want 2 (its DV and the equality delete)", n)
	}
	var got []liveRow
	for _, df := range files {
		deletes, err := ix.Load(ctx, fs, tbl.Schema(), df, seqOf[df.FilePath()], Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = ScanFile(ctx, fs, tbl.Schema(), df, deletes, Options{}, func(rec arrow.RecordBatch) error {
			got = append(got, liveRows(t, tbl.Schema(), rec)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sortRows(got)
	stats, err := Scan(ctx, tbl, snap, Options{}, func(arrow.RecordBatch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	wantStats := Stats{DataFiles: 3, RowsRead: 6, RowsLive: 3, DeletedByPos: 1, DeletedByEq: 2, DeleteFiles: 2}
	if stats != wantStats {
		t.Errorf("stats %+v, want %+v", stats, wantStats)
	}
	if full := scanAll(t, tbl, snap); fmt.Sprint(got) != fmt.Sprint(full) {
		t.Errorf("per-file scans\n %v\ndiffer from Scan\n %v", got, full)
	}
	if len(got) != 3 {
		t.Errorf("%d live rows, want 3 (ids 2, 4 and the re-inserted 5)", len(got))
	}

	// Without deletes every row of a file is live.
	var n int64
	err = ScanFile(ctx, fs, tbl.Schema(), a[0], nil, Options{Columns: []int{1}}, func(rec arrow.RecordBatch) error {
		n += rec.NumRows()
		return nil
	})
	if err != nil || n != 3 {
		t.Errorf("scan without deletes: %d rows, err %v; want 3", n, err)
	}
}

func TestScanFileCorrupt(t *testing.T) {
	tbl := newTable(t, 2, nil)
	tbl, a := testtables.Append(t, tbl, r(1, "a", 1), r(2, "b", 2))
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentData, a[0].FilePath(), iceberg.ParquetFile,
		nil, nil, nil, 3, a[0].FileSizeBytes())
	if err != nil {
		t.Fatal(err)
	}
	err = ScanFile(context.Background(), fs, tbl.Schema(), b.Build(), nil, Options{}, func(arrow.RecordBatch) error { return nil })
	if path, ok := format.CorruptPath(err); !format.IsCorruption(err) || !ok || path != a[0].FilePath() {
		t.Errorf("scan of a file whose entry claims 3 rows of 2: err %v, want a corruption naming it", err)
	}
}

func TestScanStopsOnCallbackError(t *testing.T) {
	tbl := newTable(t, 2, nil)
	tbl, _ = testtables.Append(t, tbl, r(1, "a", 1), r(2, "b", 2), r(3, "c", 3))
	stop := errors.New("stop")
	calls := 0
	_, err := Scan(context.Background(), tbl, tbl.CurrentSnapshot(), Options{BatchRows: 1}, func(arrow.RecordBatch) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("err %v after %d calls, want the callback's error after 1", err, calls)
	}
}

// TestDeleteIndexSharesMergedEqualitySets checks that data files the same
// equality delete files apply to get one merged set, loaded once, and that
// a file fewer of them apply to gets its own; the scan stays exact.
func TestDeleteIndexSharesMergedEqualitySets(t *testing.T) {
	tbl := newTable(t, 2, nil)
	var rowsA, rowsB, rowsC [][]any
	for i := range int64(6) {
		rowsA = append(rowsA, r(i, "a", 1))
		rowsB = append(rowsB, r(10+i, "b", 1))
		rowsC = append(rowsC, r(20+i, "c", 1))
	}
	tbl, a := testtables.Append(t, tbl, rowsA...)
	tbl, b := testtables.Append(t, tbl, rowsB...)
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(1)}, []any{int64(11)})
	tbl, c := testtables.Append(t, tbl, rowsC...)
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(2)}, []any{int64(21)})
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(12)}, []any{int64(22)})
	snap := tbl.CurrentSnapshot()

	ix, err := PlanDeletes(context.Background(), tbl, snap)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	load := func(f iceberg.DataFile, seq int64) *FileDeletes {
		t.Helper()
		fd, err := ix.Load(context.Background(), fs, tbl.Schema(), f, seq, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	da, db, dc := load(a[0], 1), load(b[0], 2), load(c[0], 4)
	if len(da.Equality) != 1 || len(db.Equality) != 1 || da.Equality[0] != db.Equality[0] {
		t.Errorf("files A and B meet the same 3 delete files: %d and %d sets, shared %v; want one shared merged set",
			len(da.Equality), len(db.Equality), len(da.Equality) == 1 && len(db.Equality) == 1 && da.Equality[0] == db.Equality[0])
	}
	if n := da.Equality[0].Len(); n != 6 {
		t.Errorf("merged set of A and B holds %d keys, want 6", n)
	}
	if len(dc.Equality) != 1 || dc.Equality[0] == da.Equality[0] || dc.Equality[0].Len() != 4 {
		t.Errorf("file C meets 2 of the delete files: want its own merged set of 4 keys")
	}
	var live []liveRow
	for i, row := range rowsA {
		if i != 1 && i != 2 {
			live = append(live, want(a[0], int64(i), row))
		}
	}
	for i, row := range rowsB {
		if i != 1 && i != 2 {
			live = append(live, want(b[0], int64(i), row))
		}
	}
	for i, row := range rowsC {
		if i != 1 && i != 2 {
			live = append(live, want(c[0], int64(i), row))
		}
	}
	checkRows(t, tbl, snap, live...)
}

// TestPlanFilesScannedConcurrently scans every file of a plan at once, each
// from its own goroutine, on a table with position deletes and several
// equality deletes (merged for the file they all apply to): the rows and
// counts must be those of the serial Scan, which checkRows holds to exact
// rows elsewhere.
func TestPlanFilesScannedConcurrently(t *testing.T) {
	tbl := newTable(t, 2, nil)
	var rowsA [][]any
	for i := range 40 {
		rowsA = append(rowsA, r(int64(i), fmt.Sprintf("n%d", i%7), float64(i)))
	}
	tbl, a := testtables.Append(t, tbl, rowsA...)
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: a[0], Pos: []int64{0, 5, 39}})
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(3)}, []any{int64(4)})
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(10)})
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{"n6"})
	tbl, _ = testtables.Append(t, tbl, r(3, "again", 3), r(50, "n6", 50))
	tbl, _ = testtables.Append(t, tbl, r(60, "x", 60))
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(60)}, []any{int64(20)})
	snap := tbl.CurrentSnapshot()

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	plan, err := NewPlan(context.Background(), tbl, snap, Options{BatchRows: 3, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 3 {
		t.Fatalf("plan has %d data files, want 3", len(plan.Files))
	}
	rows := make([][]liveRow, len(plan.Files))
	stats := make([]Stats, len(plan.Files))
	errs := make([]error, len(plan.Files))
	var wg sync.WaitGroup
	for i := range plan.Files {
		wg.Go(func() {
			stats[i], errs[i] = plan.ScanFile(context.Background(), i, func(rec arrow.RecordBatch) error {
				rows[i] = append(rows[i], liveRows(t, tbl.Schema(), rec)...)
				return nil
			})
		})
	}
	wg.Wait()
	var got []liveRow
	total := Stats{DeleteFiles: plan.DeleteFiles()}
	for i := range plan.Files {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		got = append(got, rows[i]...)
		total.Add(stats[i])
	}
	sortRows(got)

	want := scanAll(t, tbl, snap)
	serial, err := Scan(context.Background(), tbl, snap, Options{}, func(arrow.RecordBatch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("concurrent scan of the plan's files:\n got  %v\n want %v", got, want)
	}
	if total != serial {
		t.Errorf("concurrent scan counted %+v, serial scan %+v", total, serial)
	}
	// 43 rows, 3 deleted by position and some by equality.
	if total.DeletedByPos != 3 || total.RowsLive+total.DeletedByPos+total.DeletedByEq != 43 || total.DeletedByEq == 0 {
		t.Errorf("counts %+v", total)
	}
}

func TestAppendColumnKeyMatchesValueKey(t *testing.T) {
	mem := memory.NewGoAllocator()
	i64 := array.NewInt64Builder(mem)
	i64.AppendValues([]int64{-1, 0, 1 << 40}, nil)
	i64.AppendNull()
	i32 := array.NewInt32Builder(mem)
	i32.AppendValues([]int32{-7, 0, 9}, nil)
	i32.AppendNull()
	str := array.NewStringBuilder(mem)
	str.AppendValues([]string{"", "a\x00b", "ünï"}, nil)
	str.AppendNull()
	dbl := array.NewFloat64Builder(mem)
	dbl.AppendValues([]float64{-0.0, 1.5, math.NaN()}, nil)
	dbl.AppendNull()
	for _, b := range []array.Builder{i64, i32, str, dbl} {
		arr := b.NewArray()
		for i := range arr.Len() {
			got, err := appendColumnKey(nil, arr, i)
			if err != nil {
				t.Fatal(err)
			}
			want, err := appendValueKey(nil, format.ValueAt(arr, i))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s row %d: key %x, the value's key is %x", arr.DataType(), i, got, want)
			}
		}
		arr.Release()
		b.Release()
	}
}

// TestScanWithinReadsOnlyItsRowGroups: a scan limited to two positions
// passes on the live one of them (the other is deleted by a DV), and reads
// only the two row groups of two rows that hold them, of five.
func TestScanWithinReadsOnlyItsRowGroups(t *testing.T) {
	tbl := newTable(t, 3, nil)
	var rows [][]any
	for i := range int64(10) {
		rows = append(rows, r(i, fmt.Sprint(i), float64(i)))
	}
	tbl, files := testtables.Append(t, tbl, rows...)
	tbl, _ = testtables.AddDV(t, tbl, files[0], 7)
	ctx := context.Background()
	ix, err := PlanDeletes(ctx, tbl, tbl.CurrentSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deletes, err := ix.Load(ctx, fs, tbl.Schema(), files[0], 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	deletes.Within = roaring64.BitmapOf(3, 7)
	opts := Options{}
	opts.EnsureDefaults()
	proj, err := newProjection(tbl.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []liveRow
	stats, err := scanFile(ctx, fs, proj, files[0], deletes, opts, func(rec arrow.RecordBatch) error {
		got = append(got, liveRows(t, tbl.Schema(), rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []liveRow{want(files[0], 3, rows[3])}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scan within positions 3 and 7 passed on %v, want %v", got, want)
	}
	if stats.RowsRead != 4 {
		t.Errorf("read %d rows of 10, want 4 (the row groups of positions 3 and 7)", stats.RowsRead)
	}
}
