package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// nestedSchema puts a multi-field struct, a map and a list before the
// indexed columns and a list and a struct after them, so that top-level
// column numbers and Parquet leaf column numbers differ everywhere.
var nestedSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "s", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 3, Name: "a", Type: iceberg.PrimitiveTypes.Int32},
		{ID: 4, Name: "b", Type: iceberg.PrimitiveTypes.Int32},
	}}},
	iceberg.NestedField{ID: 5, Name: "m", Type: &iceberg.MapType{KeyID: 6, KeyType: iceberg.PrimitiveTypes.String,
		ValueID: 7, ValueType: iceberg.PrimitiveTypes.Int64, ValueRequired: false}},
	iceberg.NestedField{ID: 8, Name: "x", Type: iceberg.PrimitiveTypes.Int64},
	iceberg.NestedField{ID: 9, Name: "l", Type: &iceberg.ListType{ElementID: 10, Element: iceberg.PrimitiveTypes.Int32, ElementRequired: false}},
	iceberg.NestedField{ID: 11, Name: "tail", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 12, Name: "c", Type: iceberg.PrimitiveTypes.String},
		{ID: 13, Name: "d", Type: &iceberg.ListType{ElementID: 14, Element: iceberg.PrimitiveTypes.Int64, ElementRequired: false}},
	}}},
)

// nestedRows are rows [from, to) as JSON objects; row i has x = 1000 - i,
// so x and id sort in opposite orders, and some nested values are null or
// empty.
func nestedRows(from, to int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := from; i < to; i++ {
		if i > from {
			b.WriteByte(',')
		}
		s := fmt.Sprintf(`{"a": %d, "b": %d}`, i%5, i%3)
		if i%7 == 0 {
			s = "null"
		}
		m := fmt.Sprintf(`[{"key": "k%d", "value": %d}, {"key": "z", "value": null}]`, i, i*2)
		if i%4 == 0 {
			m = "[]"
		}
		fmt.Fprintf(&b, `{"id": %d, "s": %s, "m": %s, "x": %d, "l": [%d, %d], "tail": {"c": "t%d", "d": [%d]}}`,
			i, s, m, 1000-i, i, i+1, i%9, i)
	}
	b.WriteByte(']')
	return b.String()
}

// appendJSON commits rows given as JSON (Arrow's JSON form, nested values
// included) as one data file and returns the table and the file.
func appendJSON(t *testing.T, tbl *table.Table, rows string) (*table.Table, iceberg.DataFile) {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatalf("rows from JSON: %v", err)
	}
	defer rec.Release()
	var files []iceberg.DataFile
	batches := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	for df, err := range table.WriteRecords(context.Background(), tbl, sc, batches) {
		if err != nil {
			t.Fatalf("write data file: %v", err)
		}
		files = append(files, df)
	}
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(nil).AddRows(files...).Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	tbl, err = tx.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tbl, files[0]
}

func TestVerifyTablesWithNestedColumns(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "nested", Schema: nestedSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, f1 := appendJSON(t, tbl, nestedRows(0, 60))
	tbl, _ = appendJSON(t, tbl, nestedRows(60, 100))
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f1, Pos: []int64{2, 3, 40}})
	testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(70)}, []any{int64(71)})

	c := newCLI(t, warehouse, "")
	defs := map[string]string{
		"by_x":  `{"name":"by_x","identity":["x"],"materialized":["_file","_pos"],"cluster":["x"]}`,
		"pk":    `{"name":"pk","identity":["id"],"materialized":["_file","_pos","x"],"cluster":["id"]}`,
		"by_sb": `{"name":"by_sb","identity":["s.b","id"],"materialized":["_file","_pos"],"cluster":["s.b","id"]}`,
	}
	dir := t.TempDir()
	for name, def := range defs {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		c.ok("create", "--table", "test.nested", "--def", path)
		c.ok("build", "--table", "test.nested", "--index", name)
		if code, out, errs := c.run("verify", "--table", "test.nested", "--index", name); code != exitOK {
			t.Errorf("verify %s on a table with nested columns: exit %d, want 0\n%s%s", name, code, out, errs)
		}
	}

	// A range file of by_x without one of its entries must still be found.
	ctx := context.Background()
	ic := testtables.IndexCatalog(t, warehouse)
	ident := []string{"test", "nested"}
	md, _, err := ic.Load(ctx, ident, "by_x")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err = cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.CurrentSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	snap := md.CurrentSnapshot()
	tf, _, err := objstore.Local().ReadTracking(ctx, md, snap, is)
	if err != nil {
		t.Fatal(err)
	}
	entries := tf.Entries
	entries[0] = rewriteWithout(t, is, entries[0], 1)
	if _, _, err := flush.Publish(ctx, ic, flush.Publication{
		Table: ident, Index: "by_x", IndexUUID: md.IndexUUID, Schema: is, Entries: entries, SourceSnapshotID: snap.SourceTableSnapshotID,
	}, flush.Options{}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("verify", "--table", "test.nested", "--index", "by_x")
	if code != exitDifferent || !strings.Contains(out, "1 entries missing from the index") {
		t.Errorf("verify of a tampered index on nested columns: exit %d, want 1 with one missing entry\n%s%s", code, out, errs)
	}
}
