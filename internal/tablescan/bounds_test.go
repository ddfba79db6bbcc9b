package tablescan

import (
	"encoding/binary"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

func TestBoundValueDecodesTheSingleValueForm(t *testing.T) {
	u := uuid.New()
	for _, tc := range []struct {
		t    iceberg.Type
		b    []byte
		want any
	}{
		{iceberg.PrimitiveTypes.Int32, le32(-7), int32(-7)},
		{iceberg.PrimitiveTypes.Date, le32(19000), int32(19000)},
		{iceberg.PrimitiveTypes.Int64, le64(1 << 40), int64(1 << 40)},
		{iceberg.PrimitiveTypes.Int64, le32(-5), int64(-5)}, // written before int -> long
		{iceberg.PrimitiveTypes.TimestampTz, le64(1_700_000_000_000_000), int64(1_700_000_000_000_000)},
		{iceberg.PrimitiveTypes.String, []byte("order-17"), "order-17"},
		{iceberg.PrimitiveTypes.UUID, u[:], u},
		{iceberg.PrimitiveTypes.Int32, le64(3), nil},            // wrong width
		{iceberg.PrimitiveTypes.Timestamp, le32(3), nil},        // days, not micros
		{iceberg.PrimitiveTypes.Float64, le64(3), nil},          // not decoded
		{iceberg.DecimalTypeOf(10, 2), []byte{0x01, 0x00}, nil}, // not decoded
	} {
		if got := BoundValue(tc.t, tc.b); got != tc.want {
			t.Errorf("BoundValue(%s, %x) = %v (%T), want %v (%T)", tc.t, tc.b, got, got, tc.want, tc.want)
		}
	}
}

// boundedFile builds a data or equality delete file (on id, field 1) whose id
// column has the given bounds and null count (nulls < 0: not recorded).
func boundedFile(t *testing.T, content iceberg.ManifestEntryContent, lo, hi int64, nulls int64) iceberg.DataFile {
	t.Helper()
	spec := iceberg.NewPartitionSpec()
	b, err := iceberg.NewDataFileBuilder(spec, content, "file:///f.parquet", iceberg.ParquetFile, nil, nil, nil, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	b.LowerBoundValues(map[int][]byte{1: le64(lo)}).UpperBoundValues(map[int][]byte{1: le64(hi)})
	if nulls >= 0 {
		b.NullValueCounts(map[int]int64{1: nulls})
	}
	if content == iceberg.EntryContentEqDeletes {
		b.EqualityFieldIDs([]int{1})
	}
	return b.Build()
}

func TestEqualityMayDeleteByBounds(t *testing.T) {
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: false})
	data := boundedFile(t, iceberg.EntryContentData, 100, 199, 0)
	for _, tc := range []struct {
		name string
		del  iceberg.DataFile
		want bool
	}{
		{"keys below the data file's", boundedFile(t, iceberg.EntryContentEqDeletes, 0, 99, 0), false},
		{"keys above", boundedFile(t, iceberg.EntryContentEqDeletes, 200, 300, 0), false},
		{"touching the lower bound", boundedFile(t, iceberg.EntryContentEqDeletes, 0, 100, 0), true},
		{"touching the upper bound", boundedFile(t, iceberg.EntryContentEqDeletes, 199, 250, 0), true},
		{"inside", boundedFile(t, iceberg.EntryContentEqDeletes, 150, 151, 0), true},
		{"disjoint, a null key the data file has none of", boundedFile(t, iceberg.EntryContentEqDeletes, 0, 5, 1), false},
		{"disjoint, null counts unknown", boundedFile(t, iceberg.EntryContentEqDeletes, 0, 5, -1), false},
	} {
		if got := EqualityMayDelete(schema, tc.del, data); got != tc.want {
			t.Errorf("%s: EqualityMayDelete = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Both may hold a null: null equals null in an equality delete.
	nullData := boundedFile(t, iceberg.EntryContentData, 100, 199, 3)
	if !EqualityMayDelete(schema, boundedFile(t, iceberg.EntryContentEqDeletes, 0, 5, 1), nullData) {
		t.Error("a delete of a null key may delete a null row of a file whose other keys lie elsewhere")
	}
	if !EqualityMayDelete(schema, boundedFile(t, iceberg.EntryContentEqDeletes, 0, 5, -1), boundedFile(t, iceberg.EntryContentData, 100, 199, -1)) {
		t.Error("with neither null count recorded, both may hold a null")
	}
}
