package format

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rfPagedFile writes 600 random rows of every type in row groups of 250
// and small pages, so that a row group spans many and reading rows seeks,
// and opens the file for reading in batches of at most 7 rows.
func rfPagedFile(t *testing.T, mem *memory.CheckedAllocator, seed uint64) (*IndexSchema, []rfRow, *RangeFileReader) {
	t.Helper()
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, seed, 600)
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 250, PageSizeBytes: 256})
	r, err := OpenRangeFile(bytes.NewReader(data), "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return s, rows, r
}

func TestRangeFileReadRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the file's close
	s, rows, r := rfPagedFile(t, mem, 7)
	ids := rfStoredIDs(s)
	ctx := compute.WithAllocator(context.Background(), mem)
	read := func(fieldIDs []int, g int, offsets ...int64) ([]rfRow, error) {
		want := rfProjectedSchema(t, s, fieldIDs)
		var out []rfRow
		err := r.ReadRows(ctx, fieldIDs, g, offsets, func(rec arrow.RecordBatch) error {
			if !rec.Schema().Equal(want) || rec.NumRows() > 7 {
				t.Errorf("batch of %d rows, schema\n%s", rec.NumRows(), rec.Schema())
			}
			out = append(out, rfRowsOf(s, rec)...)
			return nil
		})
		return out, err
	}
	span := func(from, to int64) []int64 {
		var out []int64
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	for _, tc := range []struct {
		group   int
		offsets []int64
	}{
		{0, []int64{0}},
		{0, []int64{117}},
		{1, []int64{249}},
		{1, span(40, 140)},
		{2, span(0, 100)},
		{0, span(0, 250)},
		{1, []int64{3, 4, 90, 91, 92, 200, 248}},
		{2, nil},
	} {
		got, err := read(nil, tc.group, tc.offsets...)
		if err != nil {
			t.Fatalf("ReadRows(%d, %v): %v", tc.group, tc.offsets, err)
		}
		var want []rfRow
		for _, o := range tc.offsets {
			want = append(want, rows[tc.group*250+int(o)])
		}
		rfCheckRows(t, s, ids, got, want)
	}
	got, err := read([]int{rfPosID, 1}, 1, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	rfCheckRows(t, s, []int{rfPosID, 1}, got, rows[253:255])

	for _, tc := range []struct {
		group   int
		offsets []int64
		want    string
	}{
		{3, []int64{0}, "no row group 3"},
		{2, []int64{99, 100}, "row 1 is 100"},
		{0, []int64{-1}, "row 0 is -1"},
		{0, []int64{5, 5}, "must ascend"},
	} {
		if _, err := read(nil, tc.group, tc.offsets...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadRows(%d, %v) = %v, want an error containing %q", tc.group, tc.offsets, err, tc.want)
		}
	}
}

// TestRangeFileReadMatching: one pass over a row group keeps the rows the
// match picks and gives them as Read does, every type; the match sees
// strings and binaries as dictionaries and every other field as Read has
// it.
func TestRangeFileReadMatching(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the file's close
	s, rows, r := rfPagedFile(t, mem, 9)
	ctx := compute.WithAllocator(context.Background(), mem)
	full := rfProjectedSchema(t, s, nil)
	for g, every := range []int{3, 1, 1000} { // every third row, all, none
		var got []rfRow
		seen := 0
		err := r.ReadMatching(ctx, g, func(b arrow.RecordBatch) ([]bool, error) {
			for i, f := range b.Schema().Fields() {
				want := full.Field(full.FieldIndices(f.Name)[0]).Type
				switch want.ID() {
				case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
					if d, ok := b.Column(i).DataType().(*arrow.DictionaryType); !ok || !arrow.TypeEqual(d.ValueType, want) {
						t.Errorf("match got %s as %s, want a dictionary of %s", f.Name, b.Column(i).DataType(), want)
					}
				default:
					if !arrow.TypeEqual(b.Column(i).DataType(), want) {
						t.Errorf("match got %s as %s, want %s", f.Name, b.Column(i).DataType(), want)
					}
				}
			}
			keep := make([]bool, b.NumRows())
			for i := range keep {
				keep[i] = (seen+i)%every == 0
			}
			seen += len(keep)
			return keep, nil
		}, func(rec arrow.RecordBatch) error {
			if !rec.Schema().Equal(full) {
				t.Errorf("batch schema\n%s\nwant\n%s", rec.Schema(), full)
			}
			got = append(got, rfRowsOf(s, rec)...)
			return nil
		})
		if err != nil {
			t.Fatalf("ReadMatching(%d): %v", g, err)
		}
		n := min(250, len(rows)-g*250)
		var want []rfRow
		for i := range n {
			if i%every == 0 {
				want = append(want, rows[g*250+i])
			}
		}
		if seen != n {
			t.Errorf("row group %d: match saw %d rows, want %d", g, seen, n)
		}
		rfCheckRows(t, s, rfStoredIDs(s), got, want)
	}
}
