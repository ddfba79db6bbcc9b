package tablescan

import (
	"encoding/binary"
	"testing"

	"github.com/apache/iceberg-go"
)

func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

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
