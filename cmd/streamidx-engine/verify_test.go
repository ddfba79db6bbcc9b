package main

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// alteredIndex builds pk on a fresh table and returns what a test needs to
// publish a tampered snapshot of it.
type alteredIndex struct {
	c       *cli
	cat     indexcatalog.Catalog
	md      *format.Metadata
	is      *format.IndexSchema
	entries []format.TrackingEntry
	source  int64
}

func newAlteredIndex(t *testing.T) *alteredIndex {
	t.Setenv("STREAMIDX_BUILD_TARGET_FILE_SIZE", "256B") // several small range files
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	tbl, _ = buildHistory(t, tbl, 2)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	if code, out, errs := c.run("verify", "--table", "test.orders", "--index", "pk"); code != 0 {
		t.Fatalf("the untouched index must verify: %d\n%s%s", code, out, errs)
	}
	dbPath := strings.TrimPrefix(warehouse, "file://") + "/catalog.db"
	db, err := indexcatalog.OpenSQLite(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ic, err := indexcatalog.NewSQL(context.Background(), db, indexcatalog.DialectSQLite, "default")
	if err != nil {
		t.Fatal(err)
	}
	md, _, err := ic.Load(context.Background(), []string{"test", "orders"}, "pk")
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.CurrentSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	snap := md.CurrentSnapshot()
	tracking, _, err := objstore.Local().ReadTracking(context.Background(), md, snap, is)
	if err != nil {
		t.Fatal(err)
	}
	entries := tracking.Entries
	if len(entries) < 2 {
		t.Fatalf("need several range files, got %d", len(entries))
	}
	return &alteredIndex{c: c, cat: ic, md: md, is: is, entries: entries, source: snap.SourceTableSnapshotID}
}

func (a *alteredIndex) publish(t *testing.T, entries []format.TrackingEntry) {
	t.Helper()
	_, _, err := flush.Publish(context.Background(), a.cat, flush.Publication{
		Table: []string{"test", "orders"}, Index: "pk", IndexUUID: a.md.IndexUUID, Schema: a.is,
		Entries: entries, SourceSnapshotID: a.source,
	}, flush.Options{})
	if err != nil {
		t.Fatal(err)
	}
}

// tamper writes a copy of a range file whose batches went through change
// (which returns the batch to write, or nil to write nothing) and returns
// its tracking entry.
func tamper(t *testing.T, is *format.IndexSchema, e format.TrackingEntry, suffix string, change func(rec arrow.RecordBatch) arrow.RecordBatch) format.TrackingEntry {
	t.Helper()
	r, err := objstore.Local().OpenRange(context.Background(), &e, is, format.RangeFileReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	outPath := strings.TrimSuffix(e.FilePath, ".parquet") + "-" + suffix + ".parquet"
	w, err := objstore.Local().Create(context.Background(), outPath, objstore.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := format.NewRangeFileWriter(w, is, format.RangeFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
		out := change(rec)
		if out == nil {
			return nil
		}
		defer out.Release()
		return rw.Write(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	ne, err := rw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ne.FilePath = outPath
	return ne
}

// rewriteWithout writes a copy of a range file without its row skip.
func rewriteWithout(t *testing.T, is *format.IndexSchema, e format.TrackingEntry, skip int) format.TrackingEntry {
	t.Helper()
	row := 0
	return tamper(t, is, e, "tampered", func(rec arrow.RecordBatch) arrow.RecordBatch {
		start := row
		row += int(rec.NumRows())
		if skip < start || skip >= row {
			rec.Retain()
			return rec
		}
		// Everything but the skipped row: the slices on either side, concatenated.
		at := int64(skip - start)
		cols := make([]arrow.Array, rec.NumCols())
		for c := range cols {
			before, after := array.NewSlice(rec.Column(c), 0, at), array.NewSlice(rec.Column(c), at+1, rec.NumRows())
			joined, err := array.Concatenate([]arrow.Array{before, after}, memory.DefaultAllocator)
			before.Release()
			after.Release()
			if err != nil {
				t.Fatal(err)
			}
			cols[c] = joined
		}
		out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()-1)
		for _, c := range cols {
			c.Release()
		}
		return out
	})
}

func TestVerifyDetectsAMissingEntry(t *testing.T) {
	a := newAlteredIndex(t)
	entries := append([]format.TrackingEntry{}, a.entries...)
	entries[1] = rewriteWithout(t, a.is, entries[1], 2)
	a.publish(t, entries)
	code, out, errs := a.c.run("verify", "--table", "test.orders", "--index", "pk")
	if code != exitDifferent {
		t.Fatalf("verify of an index missing an entry: exit %d, want 1\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "1 entries missing from the index") || !strings.Contains(out, "id=") {
		t.Errorf("the summary should name the missing entry:\n%s", out)
	}
}

func TestVerifyDetectsARangeFileOutOfOrder(t *testing.T) {
	a := newAlteredIndex(t)
	entries := append([]format.TrackingEntry{}, a.entries...)
	// The tracking entries stay sorted, but the first two point at each
	// other's files: the ranges now overlap and the group maxima are wrong.
	entries[0].FilePath, entries[1].FilePath = entries[1].FilePath, entries[0].FilePath
	entries[0].FileSizeInBytes, entries[1].FileSizeInBytes = entries[1].FileSizeInBytes, entries[0].FileSizeInBytes
	entries[0].RecordCount, entries[1].RecordCount = entries[1].RecordCount, entries[0].RecordCount
	a.publish(t, entries)
	code, out, errs := a.c.run("verify", "--table", "test.orders", "--index", "pk")
	if code != exitDifferent {
		t.Fatalf("verify of a range file out of order: exit %d, want 1\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "group_max_value") {
		t.Errorf("the summary should say the group maximum is wrong:\n%s", out)
	}
}

func TestVerifyDetectsAWrongPosition(t *testing.T) {
	a := newAlteredIndex(t)
	// Shift every _pos of one range file by one: same ids, wrong rows.
	e := a.entries[0]
	posCol := -1
	for i, fld := range a.is.Fields() {
		if ref, ok := fld.Expr.(format.Ref); ok && ref.ID == format.FieldIDPos {
			posCol = i
		}
	}
	ne := tamper(t, a.is, e, "shifted", func(rec arrow.RecordBatch) arrow.RecordBatch {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		pos := rec.Column(posCol).(*array.Int64)
		for i := 0; i < pos.Len(); i++ {
			b.Append(pos.Value(i) + 1)
		}
		shifted := b.NewArray()
		defer shifted.Release()
		cols := append([]arrow.Array{}, rec.Columns()...)
		cols[posCol] = shifted
		return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	})
	entries := append([]format.TrackingEntry{}, a.entries...)
	entries[0] = ne
	a.publish(t, entries)
	code, out, _ := a.c.run("verify", "--table", "test.orders", "--index", "pk")
	if code != exitDifferent || !strings.Contains(out, "missing") || !strings.Contains(out, "should not be") {
		t.Fatalf("shifted positions: exit %d\n%s", code, out)
	}
}
