package tablescan

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
)

// testSchema has a column of each kind the fixtures need: the key, a string
// that can be null, float columns for NaN and -0.0, a timestamp, a decimal
// and a partition source.
func testSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "price", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: 4, Name: "score", Type: iceberg.PrimitiveTypes.Float32},
		iceberg.NestedField{ID: 5, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 6, Name: "amount", Type: iceberg.DecimalTypeOf(10, 2)},
		iceberg.NestedField{ID: 7, Name: "cat", Type: iceberg.PrimitiveTypes.String},
	)
}

// r is a row of testSchema whose other columns derive from id.
func r(id int64, name any, price float64) []any {
	return []any{id, name, price, float32(id) / 4, int64(1_700_000_000_000_000 + id*1_000_001),
		decimal128.FromI64(id*101 - 300), "x"}
}

// rc is r in partition cat.
func rc(id int64, name any, cat string) []any {
	row := r(id, name, float64(id))
	row[6] = cat
	return row
}

// special holds nulls, NaN and -0.0 in every nullable column kind.
func special() [][]any {
	return [][]any{
		{int64(100), nil, math.NaN(), float32(math.NaN()), nil, nil, "x"},
		{int64(101), "", math.Copysign(0, -1), float32(math.Copysign(0, -1)), int64(-1), decimal128.FromI64(-1), "x"},
		{int64(102), "héllo", 0.0, float32(0), int64(0), decimal128.FromI64(0), nil},
		{int64(103), "z", math.Inf(-1), float32(math.Inf(1)), int64(math.MaxInt64), decimal128.FromI64(9_999_999_999), "x"},
	}
}

// liveRow is a row as the tests compare it: its location and its values
// rendered by format.FormatValue, which keeps null, NaN and -0.0 apart.
type liveRow struct {
	File   string
	Pos    int64
	ID     int64
	Values string
}

func (l liveRow) String() string {
	return fmt.Sprintf("%s@%d id=%d [%s]", shortPath(l.File), l.Pos, l.ID, l.Values)
}

func shortPath(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// want is an expected live row: row of the data file at pos.
func want(file iceberg.DataFile, pos int64, row []any) liveRow {
	return liveRow{File: file.FilePath(), Pos: pos, ID: row[0].(int64), Values: renderRow(testSchemaTypes(), row)}
}

func testSchemaTypes() []iceberg.Type {
	var out []iceberg.Type
	for _, f := range testSchema().Fields() {
		out = append(out, f.Type)
	}
	return out
}

func renderRow(types []iceberg.Type, row []any) string {
	parts := make([]string, len(row))
	for i, v := range row {
		parts[i] = format.FormatValue(types[i], v)
	}
	return strings.Join(parts, "|")
}

// scanAll scans snap with every column and _file/_pos, three rows per batch,
// on a checked allocator, and returns the rows sorted by location.
func scanAll(t *testing.T, tbl *table.Table, snap *table.Snapshot) []liveRow {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var rows []liveRow
	schema := tbl.Schema()
	_, err := Scan(context.Background(), tbl, snap, Options{BatchRows: 3, Allocator: mem}, func(rec arrow.RecordBatch) error {
		if n := rec.NumRows(); n > 3 {
			t.Errorf("batch of %d rows, BatchRows is 3", n)
		}
		rows = append(rows, liveRows(t, schema, rec)...)
		return nil
	})
	if err != nil {
		t.Fatalf("scan snapshot %d: %v", snap.SnapshotID, err)
	}
	sortRows(rows)
	return rows
}

// liveRows converts a batch of Scan's default projection (the schema's
// columns, then _file and _pos).
func liveRows(t *testing.T, schema *iceberg.Schema, rec arrow.RecordBatch) []liveRow {
	t.Helper()
	fields := schema.Fields()
	if int(rec.NumCols()) != len(fields)+2 {
		t.Fatalf("batch has %d columns, want %d", rec.NumCols(), len(fields)+2)
	}
	files := rec.Column(len(fields)).(*array.String)
	pos := rec.Column(len(fields) + 1).(*array.Int64)
	var out []liveRow
	for i := range int(rec.NumRows()) {
		vals := make([]string, len(fields))
		for j, f := range fields {
			vals[j] = format.FormatValue(f.Type, format.ValueAtAs(f.Type, rec.Column(j), i))
		}
		out = append(out, liveRow{File: files.Value(i), Pos: pos.Value(i), ID: rec.Column(0).(*array.Int64).Value(i), Values: strings.Join(vals, "|")})
	}
	return out
}

func sortRows(rows []liveRow) {
	slices.SortFunc(rows, func(a, b liveRow) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return int(a.Pos - b.Pos)
	})
}

// checkRows asserts the exact live rows of snap, that each sits at its
// position in its raw data file, and that iceberg-go's own scan of snap sees
// the same multiset of values.
func checkRows(t *testing.T, tbl *table.Table, snap *table.Snapshot, expected ...liveRow) {
	t.Helper()
	got := scanAll(t, tbl, snap)
	sortRows(expected)
	if !slices.Equal(got, expected) {
		t.Errorf("live rows of snapshot %d:\n got  %v\n want %v", snap.SnapshotID, got, expected)
	}
	checkPositions(t, tbl, got)
	checkAgainstIceberg(t, tbl, snap, got)
}

// checkPositions reads each data file whole with pqarrow and checks that the
// row at _pos has the id the scan reported.
func checkPositions(t *testing.T, tbl *table.Table, rows []liveRow) {
	t.Helper()
	ids := map[string][]int64{}
	for _, row := range rows {
		if _, ok := ids[row.File]; !ok {
			ids[row.File] = rawIDs(t, tbl, row.File)
		}
		col := ids[row.File]
		if row.Pos >= int64(len(col)) || col[row.Pos] != row.ID {
			t.Errorf("%v: raw data file has %d rows, id at that position differs", row, len(col))
		}
	}
}

// rowGroups is the number of row groups of a Parquet file.
func rowGroups(t *testing.T, tbl *table.Table, path string) int {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	return rdr.NumRowGroups()
}

// rawIDs reads the column of field ID 1 of a data file, or the column named
// id of a file written without field IDs.
func rawIDs(t *testing.T, tbl *table.Table, path string) []int64 {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	at, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	for i, fld := range at.Schema().Fields() {
		id, _ := fld.Metadata.GetValue("PARQUET:field_id")
		if id == strconv.Itoa(1) || (id == "-1" || id == "") && fld.Name == "id" {
			var out []int64
			for _, chunk := range at.Column(i).Data().Chunks() {
				out = append(out, chunk.(*array.Int64).Int64Values()...)
			}
			return out
		}
	}
	t.Fatalf("%s has no column with field ID 1", path)
	return nil
}

// checkAgainstIceberg compares the multiset of row values with iceberg-go's
// scan of the same snapshot.
func checkAgainstIceberg(t *testing.T, tbl *table.Table, snap *table.Snapshot, rows []liveRow) {
	t.Helper()
	schema := tbl.Schema()
	sc, recs, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("iceberg-go scan: %v", err)
	}
	var theirs []string
	for rec, err := range recs {
		if err != nil {
			t.Fatalf("iceberg-go scan: %v", err)
		}
		for i := range int(rec.NumRows()) {
			vals := make([]string, 0, len(schema.Fields()))
			for _, f := range schema.Fields() {
				idx := sc.FieldIndices(f.Name)
				if len(idx) != 1 {
					t.Fatalf("iceberg-go scan has no column %s", f.Name)
				}
				vals = append(vals, format.FormatValue(f.Type, format.ValueAtAs(f.Type, rec.Column(idx[0]), i)))
			}
			theirs = append(theirs, strings.Join(vals, "|"))
		}
		rec.Release()
	}
	var ours []string
	for _, row := range rows {
		ours = append(ours, row.Values)
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	if !slices.Equal(ours, theirs) {
		t.Errorf("snapshot %d: rows differ from iceberg-go's scan:\n ours   %q\n theirs %q", snap.SnapshotID, ours, theirs)
	}
}
