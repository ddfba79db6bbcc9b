package format

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// rfSourceTypes are the source columns of the all-types index: one per
// primitive type, field IDs 1.. in this order.
var rfSourceTypes = []iceberg.Type{
	iceberg.PrimitiveTypes.Bool,
	iceberg.PrimitiveTypes.Int32,
	iceberg.PrimitiveTypes.Int64,
	iceberg.PrimitiveTypes.Float32,
	iceberg.PrimitiveTypes.Float64,
	iceberg.DecimalTypeOf(9, 2),
	iceberg.DecimalTypeOf(18, 4),
	iceberg.DecimalTypeOf(38, 10),
	iceberg.PrimitiveTypes.Date,
	iceberg.PrimitiveTypes.Time,
	iceberg.PrimitiveTypes.Timestamp,
	iceberg.PrimitiveTypes.TimestampTz,
	iceberg.PrimitiveTypes.TimestampNs,
	iceberg.PrimitiveTypes.TimestampTzNs,
	iceberg.PrimitiveTypes.String,
	iceberg.PrimitiveTypes.UUID,
	iceberg.FixedTypeOf(5),
	iceberg.PrimitiveTypes.Binary,
}

// Field IDs of the all-types index's expression fields.
const (
	rfFileID   = 1001 // materialized _file
	rfPosID    = 1002 // materialized _pos
	rfBucketID = 1003 // materialized bucket(16, c_string), first cluster field
	rfDayID    = 2001 // non-materialized day(c_timestamp), third cluster field
)

// rfAllTypesIndex is an index with every primitive type as an identity
// field, _file and _pos materialized, and a clustering key of a materialized
// int, an identity double (NaN and signed zeros) and a non-materialized date.
func rfAllTypesIndex(t testing.TB) *IndexSchema {
	t.Helper()
	return rfTypesIndex(t, func(iceberg.Type) bool { return true })
}

// rfTypesIndex is rfAllTypesIndex with identity fields of the source
// columns whose type keep accepts only.
func rfTypesIndex(t testing.TB, keep func(iceberg.Type) bool) *IndexSchema {
	t.Helper()
	return rfTypesIndexWith(t, keep, true, rfBucketID, 5, rfDayID)
}

// rfTypesIndexWith is rfTypesIndex clustered by the given fields, with or
// without the non-materialized day field.
func rfTypesIndexWith(t testing.TB, keep func(iceberg.Type) bool, withDay bool, cluster ...int) *IndexSchema {
	t.Helper()
	var fields []iceberg.NestedField
	var ids []int
	for i, typ := range rfSourceTypes {
		fields = append(fields, iceberg.NestedField{ID: i + 1, Name: fmt.Sprintf("c_%d", i+1), Type: typ})
		if keep(typ) {
			ids = append(ids, i+1)
		}
	}
	md := &Metadata{
		IdentityFields: ids,
		MaterializedFields: []ExprField{
			{FieldID: rfFileID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: Ref{ID: FieldIDFile}},
			{FieldID: rfPosID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: Ref{ID: FieldIDPos}},
			{FieldID: rfBucketID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int32, Expr: NewApply("bucket", IntLit(16), Ref{ID: 15})},
		},
		ClusterSpec: cluster,
	}
	if withDay {
		md.NonMaterializedFields = []ExprField{
			{FieldID: rfDayID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Date, Expr: NewApply("day", Ref{ID: 11})},
		}
	}
	s, err := NewIndexSchema(md, iceberg.NewSchema(0, fields...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rfSimpleIndex is the shape of the benchmark and the skipping test: a long
// key, a string, _file and _pos.
func rfSimpleIndex(t testing.TB) *IndexSchema {
	t.Helper()
	return rfSimpleIndexOf(t, iceberg.PrimitiveTypes.Int64, 1)
}

// rfSimpleIndexOf is rfSimpleIndex with a key of type idType, clustered by
// the given fields (1 the key, 2 the string).
func rfSimpleIndexOf(t testing.TB, idType iceberg.Type, cluster ...int) *IndexSchema {
	t.Helper()
	md := &Metadata{
		IdentityFields: []int{1, 2},
		MaterializedFields: []ExprField{
			{FieldID: rfFileID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: Ref{ID: FieldIDFile}},
			{FieldID: rfPosID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: Ref{ID: FieldIDPos}},
		},
		ClusterSpec: cluster,
	}
	src := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: idType},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String})
	s, err := NewIndexSchema(md, src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rfRow is one entry: values by index field ID.
type rfRow map[int]any

// rfEdgeValues are values every type must survive, beside random ones.
func rfEdgeValues(t iceberg.Type) []any {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return []any{false, true}
	case iceberg.Int32Type, iceberg.DateType:
		return []any{int32(math.MinInt32), int32(0), int32(math.MaxInt32)}
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		if _, isTime := t.(iceberg.TimeType); isTime {
			return []any{int64(0), int64(86_400_000_000 - 1)}
		}
		return []any{int64(math.MinInt64), int64(-1), int64(0), int64(math.MaxInt64)}
	case iceberg.Float32Type:
		return []any{float32(math.NaN()), float32(math.Copysign(0, -1)), float32(0), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(math.NaN(), -1))}
	case iceberg.Float64Type:
		return []any{math.NaN(), math.Copysign(0, -1), 0.0, math.Inf(1), math.Inf(-1), math.Copysign(math.NaN(), -1)}
	case iceberg.DecimalType:
		max := decimal128.GetMaxValue(int32(t.Precision()))
		return []any{max, max.Negate(), decimal128.FromI64(0)}
	case iceberg.StringType:
		return []any{"", "é", "\U0001F600", "a\x00b"}
	case iceberg.UUIDType:
		return []any{uuid.UUID{}, uuid.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	case iceberg.FixedType:
		return []any{make([]byte, t.Len()), bytes.Repeat([]byte{0xff}, t.Len())}
	case iceberg.BinaryType:
		return []any{[]byte{}, []byte{0}, []byte{0xff, 0xfe}}
	}
	panic(fmt.Sprintf("no edge values for %s", t))
}

// rfRandomValue draws a value of t: sometimes null, sometimes an edge value.
func rfRandomValue(r *rand.Rand, t iceberg.Type) any {
	switch n := r.IntN(10); {
	case n == 0:
		return nil
	case n == 1:
		edges := rfEdgeValues(t)
		return edges[r.IntN(len(edges))]
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		return r.IntN(2) == 1
	case iceberg.Int32Type:
		return int32(r.IntN(2000) - 1000)
	case iceberg.DateType:
		return int32(r.IntN(40000))
	case iceberg.Int64Type:
		return r.Int64N(1<<40) - 1<<39
	case iceberg.TimeType:
		return r.Int64N(86_400_000_000)
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return r.Int64N(4_000_000_000_000_000)
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return r.Int64N(math.MaxInt64)
	case iceberg.Float32Type:
		return float32(r.NormFloat64() * 100)
	case iceberg.Float64Type:
		return r.NormFloat64() * 1e6
	case iceberg.DecimalType:
		return decimal128.FromI64(r.Int64N(1_000_000_000) - 500_000_000)
	case iceberg.StringType:
		return fmt.Sprintf("s%d", r.IntN(500))
	case iceberg.UUIDType:
		var u uuid.UUID
		for i := range u {
			u[i] = byte(r.IntN(256))
		}
		return u
	case iceberg.FixedType:
		b := make([]byte, t.Len())
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	case iceberg.BinaryType:
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	panic(fmt.Sprintf("no random values for %s", t))
}

// rfRandomRows draws n entries of s, sorted by clustering key.
func rfRandomRows(s *IndexSchema, seed uint64, n int) []rfRow {
	r := rand.New(rand.NewPCG(seed, 0))
	rows := make([]rfRow, n)
	for i := range rows {
		rows[i] = rfRow{}
		for _, f := range s.Fields() {
			rows[i][f.ID] = rfRandomValue(r, f.Type)
		}
	}
	// Every edge value of every field appears at least once.
	for _, f := range s.Fields() {
		for j, v := range rfEdgeValues(f.Type) {
			rows[(j*7+f.ID)%n][f.ID] = v
		}
	}
	rfSortRows(s, rows)
	return rows
}

func rfSortRows(s *IndexSchema, rows []rfRow) {
	types := s.ClusterTypes()
	slices.SortStableFunc(rows, func(a, b rfRow) int {
		return CompareKeys(types, rfKey(s, a), rfKey(s, b))
	})
}

func rfKey(s *IndexSchema, row rfRow) Key {
	var k Key
	for _, f := range s.ClusterFields() {
		k = append(k, row[f.ID])
	}
	return k
}

// rfBatch builds an entry batch of rows in the layout Write takes.
func rfBatch(t testing.TB, mem memory.Allocator, s *IndexSchema, rows []rfRow) arrow.RecordBatch {
	t.Helper()
	sc, err := ArrowSchema(s.EntrySchema())
	if err != nil {
		t.Fatal(err)
	}
	return rfBatchOf(t, mem, sc, rows)
}

// rfBatchOf builds a batch of rows in Arrow schema sc, matching fields to
// values by field ID.
func rfBatchOf(t testing.TB, mem memory.Allocator, sc *arrow.Schema, rows []rfRow) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i, f := range sc.Fields() {
		id, ok := arrowFieldID(f)
		if !ok {
			id = -1 // a column without an ID gets nulls
		}
		for _, row := range rows {
			if err := AppendValue(b.Field(i), row[id]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.NewRecordBatch()
}

// rfWrite writes rows in batches of the given sizes (repeated) and closes.
func rfWrite(t testing.TB, mem memory.Allocator, s *IndexSchema, rows []rfRow, opts RangeFileOptions, batchSizes ...int) ([]byte, TrackingEntry) {
	t.Helper()
	var buf bytes.Buffer
	opts.Allocator = mem
	w, err := NewRangeFileWriter(&buf, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(batchSizes) == 0 {
		batchSizes = []int{len(rows)}
	}
	for off, i := 0, 0; off < len(rows); i++ {
		end := min(off+max(batchSizes[i%len(batchSizes)], 1), len(rows))
		rec := rfBatch(t, mem, s, rows[off:end])
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatalf("write rows %d..%d: %v", off, end, err)
		}
		off = end
	}
	entry, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), entry
}

// rfReadRows reads the given fields (nil: all stored) of the given row
// groups back into rows, checking each batch's schema on the way.
func rfReadRows(t testing.TB, r *RangeFileReader, s *IndexSchema, fieldIDs, rowGroups []int) []rfRow {
	t.Helper()
	want := rfProjectedSchema(t, s, fieldIDs)
	var rows []rfRow
	err := r.Read(context.Background(), fieldIDs, rowGroups, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(want) {
			return fmt.Errorf("batch schema\n%s\nwant\n%s", rec.Schema(), want)
		}
		rows = append(rows, rfRowsOf(s, rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// rfRowsOf turns a batch of stored fields into rows by field ID.
func rfRowsOf(s *IndexSchema, rec arrow.RecordBatch) []rfRow {
	var rows []rfRow
	for i := range int(rec.NumRows()) {
		row := rfRow{}
		for c, f := range rec.Schema().Fields() {
			id, _ := arrowFieldID(f)
			fld, _ := s.Field(id)
			v := ValueAtAs(fld.Type, rec.Column(c), i)
			if str, ok := v.(string); ok {
				v = strings.Clone(str) // ValueAt's strings share the batch's buffer
			}
			row[id] = v
		}
		rows = append(rows, row)
	}
	return rows
}

// rfProjectedSchema is the schema Read promises: StoredSchema's fields, in
// the order asked for.
func rfProjectedSchema(t testing.TB, s *IndexSchema, fieldIDs []int) *arrow.Schema {
	t.Helper()
	stored, err := ArrowSchema(s.StoredSchema())
	if err != nil {
		t.Fatal(err)
	}
	if fieldIDs == nil {
		return stored
	}
	var fields []arrow.Field
	for _, id := range fieldIDs {
		for _, f := range stored.Fields() {
			if got, _ := arrowFieldID(f); got == id {
				fields = append(fields, f)
			}
		}
	}
	return arrow.NewSchema(fields, nil)
}

// rfCheckRows compares entries field by field under Compare, which tells
// NaN, -0.0 and 0.0 apart as equality does not.
func rfCheckRows(t testing.TB, s *IndexSchema, fieldIDs []int, got, want []rfRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		for _, id := range fieldIDs {
			f, _ := s.Field(id)
			if Compare(f.Type, got[i][id], want[i][id]) != 0 {
				t.Fatalf("row %d field %d (%s): got %s, want %s", i, id, f.Name,
					FormatValue(f.Type, got[i][id]), FormatValue(f.Type, want[i][id]))
			}
		}
	}
}

// rfStoredIDs returns the IDs of the stored fields of s in StoredSchema order.
func rfStoredIDs(s *IndexSchema) []int {
	var ids []int
	for _, f := range s.Fields() {
		if f.Stored() {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

// rfExpectedStats computes, straight from the rows, the statistics the
// writer must report.
func rfExpectedStats(s *IndexSchema, rows []rfRow) map[int]*FieldStats {
	out := map[int]*FieldStats{}
	for _, f := range s.Fields() {
		var values, nulls, nans int64
		var lower, upper any
		for _, row := range rows {
			v := row[f.ID]
			values++
			switch {
			case v == nil:
				nulls++
			case rfIsNaN(v):
				nans++
			default:
				if lower == nil || Compare(f.Type, v, lower) < 0 {
					lower = v
				}
				if upper == nil || Compare(f.Type, v, upper) > 0 {
					upper = v
				}
			}
		}
		st := &FieldStats{LowerBound: lower, UpperBound: upper, ValueCount: &values, NullValueCount: &nulls}
		if lower != nil {
			tight := true
			st.TightBounds = &tight
		}
		switch f.Type.(type) {
		case iceberg.Float32Type, iceberg.Float64Type:
			st.NanValueCount = &nans
		}
		if s.IsCluster(f.ID) && len(rows) > 0 {
			st.GroupMax, st.HasGroupMax = rows[len(rows)-1][f.ID], true
		}
		out[f.ID] = st
	}
	return out
}

func rfIsNaN(v any) bool {
	switch v := v.(type) {
	case float32:
		return math.IsNaN(float64(v))
	case float64:
		return math.IsNaN(v)
	}
	return false
}

// rfCheckStats compares statistics metric by metric; bounds under Compare.
func rfCheckStats(t testing.TB, s *IndexSchema, got, want map[int]*FieldStats) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("stats for %d fields, want %d", len(got), len(want))
	}
	for id, w := range want {
		f, _ := s.Field(id)
		g := got[id]
		if g == nil {
			t.Errorf("field %d (%s): no stats", id, f.Name)
			continue
		}
		for _, m := range []struct {
			name      string
			got, want any
		}{
			{"lower_bound", g.LowerBound, w.LowerBound},
			{"upper_bound", g.UpperBound, w.UpperBound},
			{"group_max_value", g.GroupMax, w.GroupMax},
		} {
			if Compare(f.Type, m.got, m.want) != 0 {
				t.Errorf("field %d (%s) %s = %s, want %s", id, f.Name, m.name, FormatValue(f.Type, m.got), FormatValue(f.Type, m.want))
			}
		}
		if g.HasGroupMax != w.HasGroupMax {
			t.Errorf("field %d (%s) HasGroupMax = %v, want %v", id, f.Name, g.HasGroupMax, w.HasGroupMax)
		}
		for _, m := range []struct {
			name      string
			got, want *int64
		}{
			{"value_count", g.ValueCount, w.ValueCount},
			{"null_value_count", g.NullValueCount, w.NullValueCount},
			{"nan_value_count", g.NanValueCount, w.NanValueCount},
		} {
			if rfFormatCount(m.got) != rfFormatCount(m.want) {
				t.Errorf("field %d (%s) %s = %s, want %s", id, f.Name, m.name, rfFormatCount(m.got), rfFormatCount(m.want))
			}
		}
		if (g.TightBounds == nil) != (w.TightBounds == nil) || (g.TightBounds != nil && *g.TightBounds != *w.TightBounds) {
			t.Errorf("field %d (%s) tight_bounds = %v, want %v", id, f.Name, g.TightBounds, w.TightBounds)
		}
	}
}

func rfFormatCount(p *int64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// rfOpen opens a range file held in memory.
func rfOpen(t testing.TB, mem memory.Allocator, data []byte, s *IndexSchema) *RangeFileReader {
	t.Helper()
	r, err := OpenRangeFile(bytes.NewReader(data), "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// rfPoisonAllocator scribbles over every buffer it frees, so a value that
// still points into a released batch shows up as garbage.
type rfPoisonAllocator struct{}

func (rfPoisonAllocator) Allocate(size int) []byte { return make([]byte, size) }

func (a rfPoisonAllocator) Reallocate(size int, b []byte) []byte {
	out := a.Allocate(size)
	copy(out, b)
	a.Free(b)
	return out
}

func (rfPoisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xa5
	}
}
