package format

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
)

func TestRangeFileRoundTripAllTypes(t *testing.T) {
	// Poisoned buffers: statistics must not point into released batches.
	mem := memory.NewCheckedAllocator(rfPoisonAllocator{})
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 1, 500)

	data, entry := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 64}, 1, 37, 100, 3)

	if entry.FileFormat != "parquet" || entry.RecordCount != int64(len(rows)) || entry.FileSizeInBytes != int64(len(data)) {
		t.Errorf("entry: format %q, %d records, %d bytes; want parquet, %d records, %d bytes",
			entry.FileFormat, entry.RecordCount, entry.FileSizeInBytes, len(rows), len(data))
	}
	if entry.FilePath != "" {
		t.Errorf("FilePath = %q, want it left to the caller", entry.FilePath)
	}
	rfCheckStats(t, s, entry.Stats, rfExpectedStats(s, rows))

	r := rfOpen(t, mem, data, s)
	if r.NumRows() != int64(len(rows)) {
		t.Errorf("NumRows = %d, want %d", r.NumRows(), len(rows))
	}
	if want := (len(rows) + 63) / 64; r.NumRowGroups() != want {
		t.Errorf("NumRowGroups = %d, want %d", r.NumRowGroups(), want)
	}
	stored := rfStoredIDs(s)
	rfCheckRows(t, s, stored, rfReadRows(t, r, s, nil, nil), rows)

	// A projection in an order of the caller's choosing.
	proj := []int{rfPosID, 16, rfFileID, 5}
	rfCheckRows(t, s, proj, rfReadRows(t, r, s, proj, nil), rows)
}

func TestRangeFileStatsOfAllNullAndAllNaN(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := make([]rfRow, 4)
	for i := range rows {
		rows[i] = rfRow{rfBucketID: int32(i), 4: float32(math.NaN())}
	}
	_, entry := rfWrite(t, mem, s, rows, RangeFileOptions{})
	for _, f := range s.Fields() {
		st := entry.Stats[f.ID]
		if f.ID == rfBucketID {
			continue
		}
		if st.LowerBound != nil || st.UpperBound != nil || st.TightBounds != nil {
			t.Errorf("field %d (%s): bounds %v..%v tight %v, want none: no value to bound", f.ID, f.Name, st.LowerBound, st.UpperBound, st.TightBounds)
		}
	}
	if got := *entry.Stats[4].NanValueCount; got != 4 {
		t.Errorf("float nan_value_count = %d, want 4", got)
	}
	if got := *entry.Stats[4].NullValueCount; got != 0 {
		t.Errorf("float null_value_count = %d, want 0", got)
	}
	if got := *entry.Stats[5].NullValueCount; got != 4 {
		t.Errorf("double null_value_count = %d, want 4", got)
	}
	// A null clustering value is a set group_max_value whose value is null.
	if st := entry.Stats[rfDayID]; !st.HasGroupMax || st.GroupMax != nil {
		t.Errorf("group_max of a null cluster field: has %v value %v, want set and null", st.HasGroupMax, st.GroupMax)
	}
}

func TestRangeFileEmpty(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfSimpleIndex(t)
	data, entry := rfWrite(t, mem, s, nil, RangeFileOptions{})
	if entry.RecordCount != 0 || entry.FileSizeInBytes != int64(len(data)) {
		t.Errorf("entry: %d records, %d bytes; want 0 records, %d bytes", entry.RecordCount, entry.FileSizeInBytes, len(data))
	}
	if _, ok := entry.GroupMaxKey(s); ok {
		t.Error("an empty file has a group_max key")
	}
	r := rfOpen(t, mem, data, s)
	if got := rfReadRows(t, r, s, nil, nil); len(got) != 0 {
		t.Errorf("read %d rows from an empty file", len(got))
	}
}

func TestRangeFileWriterRefusesKeysOutOfOrder(t *testing.T) {
	s := rfAllTypesIndex(t)
	negZero := math.Copysign(0, -1)
	key := func(bucket, double, day any) rfRow { return rfRow{rfBucketID: bucket, 5: double, rfDayID: day} }
	for _, tc := range []struct {
		name    string
		batches [][]rfRow
		// refused is the index of the batch that must be refused, or -1.
		refused int
		// inError are the formatted keys the error must name.
		inError []string
	}{
		{
			name:    "equal keys",
			batches: [][]rfRow{{key(int32(1), 2.0, int32(3)), key(int32(1), 2.0, int32(3))}, {key(int32(1), 2.0, int32(3))}},
			refused: -1,
		},
		{
			name:    "nulls first, then NaN last, -0.0 before 0.0",
			batches: [][]rfRow{{key(nil, nil, nil), key(nil, 1.0, nil), key(int32(0), math.Copysign(math.NaN(), -1), nil), key(int32(0), math.Inf(-1), nil), key(int32(0), negZero, nil), key(int32(0), 0.0, nil), key(int32(0), math.Inf(1), nil), key(int32(0), math.NaN(), int32(5))}},
			refused: -1,
		},
		{
			name:    "decrease within a batch",
			batches: [][]rfRow{{key(int32(1), 2.0, int32(3)), key(int32(1), 2.0, int32(4)), key(int32(1), 2.0, int32(2))}},
			refused: 0,
			inError: []string{"1, 2, 1970-01-05", "1, 2, 1970-01-03"},
		},
		{
			name:    "decrease across batches",
			batches: [][]rfRow{{key(int32(1), 2.0, int32(3))}, {key(int32(1), 1.5, int32(9))}},
			refused: 1,
			inError: []string{"1, 2, 1970-01-04", "1, 1.5, 1970-01-10"},
		},
		{
			name:    "value then null",
			batches: [][]rfRow{{key(int32(1), 2.0, int32(3))}, {key(nil, 2.0, int32(3))}},
			refused: 1,
			inError: []string{"null, 2, 1970-01-04"},
		},
		{
			name:    "0.0 then -0.0",
			batches: [][]rfRow{{key(int32(1), 0.0, nil), key(int32(1), negZero, nil)}},
			refused: 0,
		},
		{
			name:    "NaN then infinity",
			batches: [][]rfRow{{key(int32(1), math.NaN(), nil)}, {key(int32(1), math.Inf(1), nil)}},
			refused: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			var buf bytes.Buffer
			w, err := NewRangeFileWriter(&buf, s, RangeFileOptions{Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			var accepted []rfRow
			for i, batch := range tc.batches {
				rec := rfBatch(t, mem, s, batch)
				err := w.Write(rec)
				rec.Release()
				if i != tc.refused {
					if err != nil {
						t.Fatalf("batch %d refused: %v", i, err)
					}
					accepted = append(accepted, batch...)
					continue
				}
				if !errors.Is(err, ErrOutOfOrder) {
					t.Fatalf("batch %d: error %v, want ErrOutOfOrder", i, err)
				}
				for _, k := range tc.inError {
					if !strings.Contains(err.Error(), "("+k+")") {
						t.Errorf("error %q does not name key (%s)", err, k)
					}
				}
			}
			switch got := w.LastKey(); {
			case len(accepted) == 0:
				if got != nil {
					t.Errorf("LastKey = %v with nothing written, want nil", got)
				}
			case got == nil || CompareKeys(s.ClusterTypes(), got, rfKey(s, accepted[len(accepted)-1])) != 0:
				t.Errorf("LastKey = %v, want the last accepted key", got)
			}
			entry, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			// A refused batch leaves no trace: the file holds the accepted rows.
			if entry.RecordCount != int64(len(accepted)) {
				t.Errorf("RecordCount = %d, want %d", entry.RecordCount, len(accepted))
			}
			rfCheckStats(t, s, entry.Stats, rfExpectedStats(s, accepted))
			r := rfOpen(t, mem, buf.Bytes(), s)
			rfCheckRows(t, s, rfStoredIDs(s), rfReadRows(t, r, s, nil, nil), accepted)
		})
	}
}

func TestRangeFileWriterRejectsMismatchedBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfSimpleIndex(t)
	entries, err := ArrowSchema(s.EntrySchema())
	if err != nil {
		t.Fatal(err)
	}
	withID := func(name string, typ arrow.DataType, id string) arrow.Field {
		return arrow.Field{Name: name, Type: typ, Nullable: true, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{id})}
	}
	for _, tc := range []struct {
		name   string
		schema *arrow.Schema
		want   string
	}{
		{"missing field", arrow.NewSchema(entries.Fields()[:3], nil), "no column for field 1002"},
		{"wrong type", arrow.NewSchema(append(entries.Fields()[:3:3], withID("_pos", arrow.PrimitiveTypes.Int32, "1002")), nil), "is int32, want int64"},
		{"unknown field", arrow.NewSchema(append(entries.Fields()[:4:4], withID("x", arrow.PrimitiveTypes.Int32, "77")), nil), "field ID 77"},
		{"no field ID", arrow.NewSchema(append(entries.Fields()[:4:4], arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), nil), "no field ID"},
		{"field twice", arrow.NewSchema(append(entries.Fields()[:4:4], entries.Field(0)), nil), "two columns have field ID 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewRangeFileWriter(&buf, s, RangeFileOptions{Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			rec := rfBatchOf(t, mem, tc.schema, []rfRow{{1: int64(1), 2: "a", rfFileID: "f"}})
			err = w.Write(rec)
			rec.Release()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Write = %v, want an error containing %q", err, tc.want)
			}
			if _, err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRangeFileIsAnIcebergDataFile reads the Parquet schema back with
// arrow-go's Parquet reader alone and checks what Iceberg's Parquet
// requirements ask: field IDs on every column, and Iceberg's type mapping.
func TestRangeFileIsAnIcebergDataFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 2, 300)
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 100})

	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	sc := pf.MetaData().Schema

	type col struct {
		physical parquet.Type
		logical  schema.LogicalType
		length   int // fixed_len_byte_array only
	}
	want := map[int]col{
		1:          {parquet.Types.Boolean, schema.NoLogicalType{}, 0},
		2:          {parquet.Types.Int32, schema.NewIntLogicalType(32, true), 0},
		3:          {parquet.Types.Int64, schema.NewIntLogicalType(64, true), 0},
		4:          {parquet.Types.Float, schema.NoLogicalType{}, 0},
		5:          {parquet.Types.Double, schema.NoLogicalType{}, 0},
		6:          {parquet.Types.Int32, schema.NewDecimalLogicalType(9, 2), 0},
		7:          {parquet.Types.Int64, schema.NewDecimalLogicalType(18, 4), 0},
		8:          {parquet.Types.FixedLenByteArray, schema.NewDecimalLogicalType(38, 10), 16},
		9:          {parquet.Types.Int32, schema.DateLogicalType{}, 0},
		10:         {parquet.Types.Int64, schema.NewTimeLogicalType(false, schema.TimeUnitMicros), 0},
		11:         {parquet.Types.Int64, schema.NewTimestampLogicalType(false, schema.TimeUnitMicros), 0},
		12:         {parquet.Types.Int64, schema.NewTimestampLogicalType(true, schema.TimeUnitMicros), 0},
		13:         {parquet.Types.Int64, schema.NewTimestampLogicalType(false, schema.TimeUnitNanos), 0},
		14:         {parquet.Types.Int64, schema.NewTimestampLogicalType(true, schema.TimeUnitNanos), 0},
		15:         {parquet.Types.ByteArray, schema.StringLogicalType{}, 0},
		16:         {parquet.Types.FixedLenByteArray, schema.UUIDLogicalType{}, 16},
		17:         {parquet.Types.FixedLenByteArray, schema.NoLogicalType{}, 5},
		18:         {parquet.Types.ByteArray, schema.NoLogicalType{}, 0},
		rfFileID:   {parquet.Types.ByteArray, schema.StringLogicalType{}, 0},
		rfPosID:    {parquet.Types.Int64, schema.NewIntLogicalType(64, true), 0},
		rfBucketID: {parquet.Types.Int32, schema.NewIntLogicalType(32, true), 0},
	}
	if sc.NumColumns() != len(want) {
		t.Fatalf("%d columns, want %d (the non-materialized field must not be stored)", sc.NumColumns(), len(want))
	}
	for i := range sc.NumColumns() {
		c := sc.Column(i)
		id := int(c.SchemaNode().FieldID())
		w, ok := want[id]
		if !ok {
			t.Errorf("column %s has field ID %d, not a stored index field", c.Name(), id)
			continue
		}
		if c.PhysicalType() != w.physical || !c.LogicalType().Equals(w.logical) {
			t.Errorf("field %d: %s %s, want %s %s", id, c.PhysicalType(), c.LogicalType(), w.physical, w.logical)
		}
		if w.length > 0 && c.TypeLength() != w.length {
			t.Errorf("field %d: fixed length %d, want %d", id, c.TypeLength(), w.length)
		}
		if c.SchemaNode().RepetitionType() != parquet.Repetitions.Optional {
			t.Errorf("field %d is %s, want optional", id, c.SchemaNode().RepetitionType())
		}
	}

	// Readers can skip row groups and pages: statistics, page indexes, and
	// the declared sort order of the stored cluster-key prefix (the bucket;
	// the double after it has NaN where Parquet readers do not expect it).
	bucketCol := -1
	for i := range sc.NumColumns() {
		if sc.Column(i).SchemaNode().FieldID() == rfBucketID {
			bucketCol = i
		}
	}
	for g := range pf.NumRowGroups() {
		rg := pf.MetaData().RowGroup(g)
		for i := range sc.NumColumns() {
			cc, err := rg.ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if set, err := cc.StatsSet(); err != nil || !set {
				t.Errorf("row group %d column %s: no statistics", g, sc.Column(i).Name())
			}
			if _, ok := rg.ColumnIndexLocation(i); !ok {
				t.Errorf("row group %d column %s: no column index", g, sc.Column(i).Name())
			}
			if _, ok := rg.OffsetIndexLocation(i); !ok {
				t.Errorf("row group %d column %s: no offset index", g, sc.Column(i).Name())
			}
		}
		sorting := rg.SortingColumns()
		if len(sorting) != 1 || int(sorting[0].ColumnIdx) != bucketCol || sorting[0].Descending || !sorting[0].NullsFirst {
			t.Errorf("row group %d sorting columns %+v, want the bucket column ascending, nulls first", g, sorting)
		}
	}
}

func TestRangeFileDictionaryForRepetitiveStrings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfSimpleIndex(t)
	rows := make([]rfRow, 5000)
	for i := range rows {
		rows[i] = rfRow{1: int64(i), 2: string(rune('a' + i%3)), rfFileID: "s3://bucket/data/00001.parquet", rfPosID: int64(i)}
	}
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{})
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	sc := pf.MetaData().Schema
	for i := range sc.NumColumns() {
		if sc.Column(i).PhysicalType() != parquet.Types.ByteArray {
			continue
		}
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if !cc.HasDictionaryPage() {
			t.Errorf("string column %s with 3 distinct values has no dictionary", sc.Column(i).Name())
		}
	}
}

func TestRangeFileOptionsRefuseNegativeSizes(t *testing.T) {
	s := rfSimpleIndex(t)
	for _, opts := range []RangeFileOptions{{RowGroupRows: -1}, {PageSizeBytes: -1}} {
		if _, err := NewRangeFileWriter(&bytes.Buffer{}, s, opts); err == nil {
			t.Errorf("NewRangeFileWriter(%+v) succeeded", opts)
		}
	}
}

// TestRangeFileIntegersDeltaEncoded: integer columns that are not cluster
// fields are written as DELTA_BINARY_PACKED and read back exactly, steps
// that overflow 64 (and 32) bits included; cluster fields keep the pages the
// page index picks from.
func TestRangeFileIntegersDeltaEncoded(t *testing.T) {
	for _, c := range []struct {
		name    string
		typ     iceberg.Type
		cluster int // field 1 (the id) or 2 (the name)
		ids     []any
	}{
		{"long key", iceberg.PrimitiveTypes.Int64, 1, []any{int64(math.MinInt64), int64(math.MinInt64 + 1), int64(-1), int64(0), int64(1), int64(1 << 40), int64(math.MaxInt64 - 1), int64(math.MaxInt64)}},
		{"int carried", iceberg.PrimitiveTypes.Int32, 2, []any{int32(math.MaxInt32), int32(math.MinInt32), int32(-7), int32(math.MaxInt32 - 1), int32(3), int32(0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			s := rfSimpleIndexOf(t, c.typ, c.cluster)
			var rows []rfRow
			positions := []int64{math.MaxInt64, math.MinInt64, 0, math.MaxInt64, -1, math.MinInt64}
			for rep := range 300 { // past one block of 128 values
				for i, id := range c.ids {
					n := len(rows)
					rows = append(rows, rfRow{1: id, 2: fmt.Sprintf("n-%04d-%d", rep, i), rfFileID: "s3://b/data/f.parquet", rfPosID: positions[n%len(positions)]})
				}
			}
			// In cluster order; the identity's other field breaks ties.
			slices.SortStableFunc(rows, func(a, b rfRow) int {
				byID, byName := Compare(c.typ, a[1], b[1]), strings.Compare(a[2].(string), b[2].(string))
				if c.cluster == 2 {
					return cmp.Or(byName, byID)
				}
				return cmp.Or(byID, byName)
			})
			data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 1000}, 77, 500)

			pf, err := file.NewParquetReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			defer pf.Close()
			sc := pf.MetaData().Schema
			checked := 0
			for g := range pf.NumRowGroups() {
				for i := range sc.NumColumns() {
					col := sc.Column(i)
					if pt := col.PhysicalType(); pt != parquet.Types.Int32 && pt != parquet.Types.Int64 {
						continue
					}
					cc, err := pf.MetaData().RowGroup(g).ColumnChunk(i)
					if err != nil {
						t.Fatal(err)
					}
					delta := slices.Contains(cc.Encodings(), parquet.Encodings.DeltaBinaryPacked)
					if want := !s.IsCluster(int(col.SchemaNode().FieldID())); delta != want {
						t.Errorf("row group %d column %s: encodings %v; DELTA_BINARY_PACKED %v, want %v", g, col.Name(), cc.Encodings(), delta, want)
					}
					checked++
				}
			}
			if checked < 2*pf.NumRowGroups() {
				t.Fatalf("%d integer column chunks in %d row groups, want two in each", checked, pf.NumRowGroups())
			}
			r := rfOpen(t, mem, data, s)
			rfCheckRows(t, s, rfStoredIDs(s), rfReadRows(t, r, s, nil, nil), rows)
		})
	}
}
