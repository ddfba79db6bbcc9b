package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/verify"
	"github.com/streamidx/streamidx/updater"
)

const pkDefinition = `{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`

// identicalRows is a table whose one data file holds orders 1, 2, 2, 2, 3
// (three identical rows) with position 2, one of the identical rows,
// deleted (a deletion vector on a v3 table), and pk built on it.
type identicalRows struct {
	t    *testing.T
	tbl  *table.Table
	ic   indexcatalog.Catalog
	md   *format.Metadata
	is   *format.IndexSchema
	path string // the data file
}

func newIdenticalRows(t *testing.T, formatVersion int) *identicalRows {
	ctx := context.Background()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: formatVersion})
	ic := testtables.IndexCatalog(t, warehouse)
	testtables.CreateIndexes(t, ic, tbl, pkDefinition)
	dup := testtables.OrderRow(2, 0)
	tbl, files := testtables.Append(t, tbl, testtables.OrderRow(1, 0), dup, dup, dup, testtables.OrderRow(3, 0))
	if len(files) != 1 {
		t.Fatalf("want one data file, got %d", len(files))
	}
	if formatVersion >= 3 {
		tbl, _ = testtables.AddDV(t, tbl, files[0], 2)
	} else {
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: files[0], Pos: []int64{2}})
	}
	md, _, err := ic.Load(ctx, tbl.Identifier(), "pk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := updater.BuildAndPublish(ctx, ic, tbl, "pk", md, tbl.CurrentSnapshot(), updater.BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.CurrentSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	return &identicalRows{t: t, tbl: tbl, ic: ic, md: md, is: is, path: files[0].FilePath()}
}

// verifyCurrent verifies the index's current snapshot.
func (x *identicalRows) verifyCurrent() *verify.Report {
	x.t.Helper()
	md, _, err := x.ic.Load(context.Background(), x.tbl.Identifier(), "pk")
	if err != nil {
		x.t.Fatal(err)
	}
	rep, err := verify.Verify(context.Background(), x.tbl, md, md.CurrentSnapshot(), verify.Options{})
	if err != nil {
		x.t.Fatal(err)
	}
	return rep
}

// publish writes one range file holding an entry (id, data file, position)
// for each of the given pairs, in id order, and publishes it as the index's
// snapshot of the table's current snapshot.
func (x *identicalRows) publish(name string, entries [][2]int64) {
	x.t.Helper()
	ctx := context.Background()
	source := map[int]int{} // index field ID -> the source field it stores
	for _, f := range x.is.Fields() {
		if r, ok := f.Expr.(format.Ref); ok {
			source[f.ID] = r.ID
		}
	}
	var rows [][]any
	for _, e := range entries {
		var row []any
		for _, f := range x.is.EntrySchema().Fields() {
			switch source[f.ID] {
			case format.FieldIDFile:
				row = append(row, x.path)
			case format.FieldIDPos:
				row = append(row, e[1])
			default:
				row = append(row, e[0])
			}
		}
		rows = append(rows, row)
	}
	rec := testtables.Record(x.t, x.is.EntrySchema(), rows...)
	defer rec.Release()
	path := x.md.Location + "/data/" + name + ".parquet"
	w, err := objstore.Local().Create(ctx, path, objstore.CreateOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	rw, err := format.NewRangeFileWriter(w, x.is, format.RangeFileOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	if err := rw.Write(rec); err != nil {
		x.t.Fatal(err)
	}
	te, err := rw.Close()
	if err != nil {
		x.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		x.t.Fatal(err)
	}
	te.FilePath = path
	_, _, err = flush.Publish(ctx, x.ic, flush.Publication{
		Table: x.tbl.Identifier(), Index: "pk", IndexUUID: x.md.IndexUUID, Schema: x.is,
		Entries: []format.TrackingEntry{te}, SourceSnapshotID: x.tbl.CurrentSnapshot().SnapshotID,
	}, flush.Options{})
	if err != nil {
		x.t.Fatal(err)
	}
}

// publishOrder2 publishes an index of orders 1 (position 0), 2 at the
// given positions and 3 (position 4), and verifies it.
func (x *identicalRows) publishOrder2(name string, pos []int64) *verify.Report {
	x.t.Helper()
	entries := [][2]int64{{1, 0}}
	for _, p := range pos {
		entries = append(entries, [2]int64{2, p})
	}
	entries = append(entries, [2]int64{3, 4})
	x.publish(name, entries)
	return x.verifyCurrent()
}

// Which two of three identical rows were left live no content can tell, so
// an index may point their entries at any two of the three positions, but
// not elsewhere, and it must hold two of them.
func TestIdenticalRowsWithADeletedOneMatchAnyOfTheirPositions(t *testing.T) {
	x := newIdenticalRows(t, 2)
	rep := x.verifyCurrent()
	if !rep.Exact() {
		t.Fatalf("the built index must verify:\n%s", rep.Summary())
	}
	if rep.AmbiguousRows != 2 {
		t.Errorf("ambiguous rows: %d, want the 2 live identical rows", rep.AmbiguousRows)
	}
	for _, tc := range []struct {
		name        string
		pos         []int64 // of the two entries of order 2
		exact       bool
		missing     int64
		unexpected  int64
		missingText string
	}{
		{name: "deleted-position", pos: []int64{1, 2}, exact: true},
		{name: "other-two", pos: []int64{2, 3}, exact: true},
		{name: "another-row", pos: []int64{1, 4}, missing: 1, unexpected: 1, missingText: "_pos=<one of identical rows>"},
		{name: "one-entry", pos: []int64{3}, missing: 1, missingText: "_pos=<one of identical rows>"},
		{name: "three-entries", pos: []int64{1, 2, 3}, unexpected: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := x.publishOrder2(tc.name, tc.pos)
			if rep.Exact() != tc.exact || rep.Missing != tc.missing || rep.Unexpected != tc.unexpected {
				t.Fatalf("order 2 at positions %v: exact %v, missing %d, unexpected %d; want %v, %d, %d\n%s",
					tc.pos, rep.Exact(), rep.Missing, rep.Unexpected, tc.exact, tc.missing, tc.unexpected, rep.Summary())
			}
			if tc.missingText != "" && !strings.Contains(strings.Join(rep.MissingSample, "\n"), tc.missingText) {
				t.Errorf("the missing entry should be named as one of identical rows:\n%s", rep.Summary())
			}
		})
	}
}

// An index that points an entry at the wrong row of a data file with
// deletes is found out, and one that leaves out a row too.
func TestPositionsInAFileWithDeletes(t *testing.T) {
	ctx := context.Background()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	ic := testtables.IndexCatalog(t, warehouse)
	testtables.CreateIndexes(t, ic, tbl, pkDefinition)
	tbl, files := testtables.Append(t, tbl, testtables.OrderRows(0, 40, 0)...)
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: files[0], Pos: []int64{0, 7, 8, 39}})
	md, _, err := ic.Load(ctx, tbl.Identifier(), "pk")
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.CurrentSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	x := &identicalRows{t: t, tbl: tbl, ic: ic, md: md, is: is, path: files[0].FilePath()}
	live := func(skipID int64, shift map[int64]int64) [][2]int64 {
		var out [][2]int64
		for id := int64(0); id < 40; id++ {
			if id == 0 || id == 7 || id == 8 || id == 39 || id == skipID {
				continue
			}
			out = append(out, [2]int64{id, id + shift[id]})
		}
		return out
	}
	for _, tc := range []struct {
		name                string
		entries             [][2]int64
		missing, unexpected int64
	}{
		{name: "right", entries: live(-1, nil)},
		{name: "deleted-row", entries: live(9, map[int64]int64{6: 1}), missing: 2, unexpected: 1},
		{name: "row-left-out", entries: live(20, nil), missing: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x.publish(tc.name, tc.entries)
			rep := x.verifyCurrent()
			if rep.Missing != tc.missing || rep.Unexpected != tc.unexpected || rep.AmbiguousRows != 0 {
				t.Fatalf("%s: missing %d, unexpected %d, ambiguous %d; want %d, %d, 0\n%s", tc.name, rep.Missing, rep.Unexpected,
					rep.AmbiguousRows, tc.missing, tc.unexpected, rep.Summary())
			}
			if want := int64(36); rep.ExpectedEntries != want {
				t.Errorf("expected entries %d, want %d", rep.ExpectedEntries, want)
			}
			if tc.missing > 0 && !strings.Contains(rep.Summary(), fmt.Sprintf("_file=%s", x.path)) {
				t.Errorf("the summary should name the data file:\n%s", rep.Summary())
			}
		})
	}
}

// On a v3 table each live row comes with its _row_id, so even identical
// rows have known positions: the index must point at the two live ones
// exactly, and one that points at the deleted row is found out.
func TestIdenticalRowsOfAV3TableHaveExactPositions(t *testing.T) {
	x := newIdenticalRows(t, 3)
	rep := x.verifyCurrent()
	if !rep.Exact() || rep.AmbiguousRows != 0 || rep.ExpectedEntries != 4 {
		t.Fatalf("the built index: exact %v, ambiguous rows %d, expected entries %d; want exact, 0, 4\n%s",
			rep.Exact(), rep.AmbiguousRows, rep.ExpectedEntries, rep.Summary())
	}
	for _, tc := range []struct {
		name                string
		pos                 []int64 // of the two entries of order 2
		missing, unexpected int64
	}{
		{name: "live-two", pos: []int64{1, 3}},
		{name: "deleted-position", pos: []int64{1, 2}, missing: 1, unexpected: 1},
		{name: "other-deleted", pos: []int64{2, 3}, missing: 1, unexpected: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := x.publishOrder2(tc.name, tc.pos)
			if rep.Missing != tc.missing || rep.Unexpected != tc.unexpected || rep.AmbiguousRows != 0 {
				t.Fatalf("order 2 at positions %v: missing %d, unexpected %d, ambiguous %d; want %d, %d, 0\n%s",
					tc.pos, rep.Missing, rep.Unexpected, rep.AmbiguousRows, tc.missing, tc.unexpected, rep.Summary())
			}
			if tc.missing > 0 && !strings.Contains(strings.Join(rep.MissingSample, "\n"), "_pos=3") && !strings.Contains(strings.Join(rep.MissingSample, "\n"), "_pos=1") {
				t.Errorf("the missing entry should name a live position:\n%s", rep.Summary())
			}
		})
	}
}

// TestEqualityDeletesApplyByTheirSequenceNumbers: verify applies equality
// deletes itself, to the data files iceberg-go's plan names for each: an
// order upserted twice keeps only its newest version (the second delete
// removes the first upsert's row, not the row inserted beside it), a
// delete of a null customer removes the rows whose customer is null, and a
// position delete in the same data file is applied beside them.
func TestEqualityDeletesApplyByTheirSequenceNumbers(t *testing.T) {
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			ctx := context.Background()
			cat, warehouse := testtables.NewCatalog(t)
			tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: v})
			ic := testtables.IndexCatalog(t, warehouse)
			testtables.CreateIndexes(t, ic, tbl, pkDefinition)
			tbl, first := testtables.Append(t, tbl, testtables.OrderRows(0, 20, 0)...)
			// Order 5 goes by position (a deletion vector on v3), so that
			// iceberg-go's deletes and verify's meet in one data file.
			if v >= 3 {
				tbl, _ = testtables.AddDV(t, tbl, first[0], 5)
			} else {
				tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: first[0], Pos: []int64{5}})
			}
			del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(3)})
			tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, testtables.OrderRow(3, 1))
			del = testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(3)}, []any{int64(7)})
			tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, testtables.OrderRow(3, 2), testtables.OrderRow(7, 2))
			// Orders 0 and 11 have no customer (OrderRow).
			tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{nil})

			md, _, err := ic.Load(ctx, tbl.Identifier(), "pk")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := updater.BuildAndPublish(ctx, ic, tbl, "pk", md, tbl.CurrentSnapshot(), updater.BuildOptions{}); err != nil {
				t.Fatal(err)
			}
			if md, _, err = ic.Load(ctx, tbl.Identifier(), "pk"); err != nil {
				t.Fatal(err)
			}
			rep, err := verify.Verify(ctx, tbl, md, md.CurrentSnapshot(), verify.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Exact() || rep.ExpectedEntries != 17 || rep.AmbiguousRows != 0 {
				t.Errorf("want exact with 17 live rows (20 orders less 0, 5 and 11, 3 and 7 once each), none ambiguous; got %d live, %d ambiguous:\n%s",
					rep.ExpectedEntries, rep.AmbiguousRows, rep.Summary())
			}
		})
	}
}
