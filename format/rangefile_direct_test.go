package format

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// rfDirectTypes are the source types whose columns ReadMatchingInts
// decodes: all but decimals, uuid and fixed.
func rfDirectTypes(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.DecimalType, iceberg.UUIDType, iceberg.FixedType:
		return false
	}
	return true
}

// TestRangeFileReadMatchingInts: the direct pass over a row group hands
// match the integer key columns as the file holds them (nulls marked, int
// widened to long) and gives the kept rows exactly as ReadMatching does,
// every type it decodes, nulls included; a file with a column it does not
// decode, or a key that is not integer-like, is left to ReadMatching.
func TestRangeFileReadMatchingInts(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the files' close
	ctx := compute.WithAllocator(context.Background(), mem)
	s := rfTypesIndex(t, rfDirectTypes)
	// Pages end every 1,024 rows (the writer's batch), and batches of 100
	// rows cross them.
	const groupRows, batchRows = 2500, 100
	rows := rfRandomRows(s, 11, 4000)
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: groupRows, PageSizeBytes: 256})
	r, err := OpenRangeFile(bytes.NewReader(data), "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: batchRows})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	full := rfProjectedSchema(t, s, nil)
	keys := []int{2, 3, 12, rfPosID} // int, long, timestamptz, _pos
	// Keep a row when its int is even or its long is null: both kinds of
	// column, nulls and values, decide.
	keepRow := func(row rfRow) bool {
		i, _ := row[2].(int32)
		return (row[2] != nil && i%2 == 0) || row[3] == nil
	}
	for g := range r.NumRowGroups() {
		base := g * groupRows
		n := min(groupRows, len(rows)-base)
		if pages, err := r.PageStats(g, rfFileID); err != nil || len(pages) < 2 {
			t.Fatalf("row group %d: %d pages of _file (%v); the test needs several", g, len(pages), err)
		}
		seen := 0
		var got []rfRow
		done, err := r.ReadMatchingInts(ctx, g, keys, func(vals [][]int64, valid [][]bool, keep []bool) error {
			if len(keep) > batchRows {
				t.Errorf("batch of %d rows, want at most %d", len(keep), batchRows)
			}
			for k, id := range keys {
				for i := range keep {
					want := rows[base+seen+i][id]
					isNull := valid[k] != nil && !valid[k][i]
					if (want == nil) != isNull {
						t.Fatalf("row group %d row %d field %d: null %v, want %v", g, seen+i, id, isNull, want == nil)
					}
					if want != nil && vals[k][i] != asInt(want) {
						t.Fatalf("row group %d row %d field %d: %d, want %v", g, seen+i, id, vals[k][i], want)
					}
				}
			}
			for i := range keep {
				keep[i] = keepRow(rows[base+seen+i])
			}
			seen += len(keep)
			return nil
		}, func(rec arrow.RecordBatch) error {
			if !rec.Schema().Equal(full) {
				t.Errorf("batch schema\n%s\nwant\n%s", rec.Schema(), full)
			}
			got = append(got, rfRowsOf(s, rec)...)
			return nil
		})
		if err != nil || !done {
			t.Fatalf("ReadMatchingInts(%d) = %v, %v", g, done, err)
		}
		if seen != n {
			t.Errorf("row group %d: match saw %d rows, want %d", g, seen, n)
		}
		var want []rfRow
		for _, row := range rows[base : base+n] {
			if keepRow(row) {
				want = append(want, row)
			}
		}
		if len(want) == 0 || len(want) == n {
			t.Fatalf("row group %d: the test keeps %d of %d rows; it must keep some and drop some", g, len(want), n)
		}
		rfCheckRows(t, s, rfStoredIDs(s), got, want)

		// The same rows as ReadMatching gives them.
		var slow []rfRow
		off := 0
		err = r.ReadMatching(ctx, g, func(b arrow.RecordBatch) ([]bool, error) {
			keep := make([]bool, b.NumRows())
			for i := range keep {
				keep[i] = keepRow(rows[base+off+i])
			}
			off += len(keep)
			return keep, nil
		}, func(rec arrow.RecordBatch) error {
			slow = append(slow, rfRowsOf(s, rec)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rfCheckRows(t, s, rfStoredIDs(s), got, slow)
	}

	never := func([][]int64, [][]bool, []bool) error { t.Error("match called"); return nil }
	emit := func(arrow.RecordBatch) error { t.Error("batch handed on"); return nil }
	if done, err := r.ReadMatchingInts(ctx, 0, []int{15}, never, emit); done || err != nil { // a string key
		t.Errorf("ReadMatchingInts by a string key = %v, %v; want false, nil", done, err)
	}
	_, _, all := rfPagedFile(t, mem, 9) // has decimals, uuid and fixed
	if done, err := all.ReadMatchingInts(ctx, 0, []int{2}, never, emit); done || err != nil {
		t.Errorf("ReadMatchingInts of a file with decimals = %v, %v; want false, nil", done, err)
	}
}

// asInt is an integer-like value of an entry as ReadMatchingInts hands it.
func asInt(v any) int64 {
	switch v := v.(type) {
	case int32:
		return int64(v)
	case int64:
		return v
	}
	panic(v)
}
