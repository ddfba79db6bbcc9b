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

// TestRangeFileBlocks: a block read at any page boundary or inside a page,
// of any length, gives back the rows written there, every type, for all
// rows and for chosen rows and fields; and a block reads nothing again.
func TestRangeFileBlocks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 11, 600)
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 250, PageSizeBytes: 256})
	src := &countingReader{Reader: bytes.NewReader(data)}
	r, err := OpenRangeFile(src, "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ids := rfStoredIDs(s)
	ctx := compute.WithAllocator(context.Background(), mem)
	collect := func(rec arrow.RecordBatch, fieldIDs []int) []rfRow {
		t.Helper()
		defer rec.Release()
		if want := rfProjectedSchema(t, s, fieldIDs); !rec.Schema().Equal(want) {
			t.Errorf("schema\n%s\nwant\n%s", rec.Schema(), want)
		}
		return rfRowsOf(s, rec)
	}
	for _, tc := range []struct {
		group       int
		first, n    int64
		chosen      []int64
		chosenField []int
	}{
		{0, 0, 250, []int64{0, 1, 249}, nil},
		{0, 117, 1, []int64{0}, nil},
		{1, 40, 100, []int64{3, 50, 99}, []int{rfPosID, 1}},
		{2, 0, 100, nil, nil},
		{1, 249, 1, nil, []int{1}},
		{1, 40, 100, []int64{20, 21, 22, 23}, nil}, // a run inside the block
		{0, 0, 250, []int64{248, 249}, []int{rfPosID, 1}},
	} {
		b, err := r.ReadBlock(ctx, tc.group, tc.first, tc.n)
		if err != nil {
			t.Fatalf("ReadBlock(%d, %d, %d): %v", tc.group, tc.first, tc.n, err)
		}
		if b.NumRows() != tc.n || b.Bytes() <= 0 {
			t.Errorf("block of %d rows, %d bytes; want %d rows", b.NumRows(), b.Bytes(), tc.n)
		}
		base := tc.group*250 + int(tc.first)
		all, err := b.Rows(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		rfCheckRows(t, s, ids, collect(all, nil), rows[base:base+int(tc.n)])
		if tc.chosen == nil {
			continue
		}
		read := src.n
		picked, err := b.Rows(ctx, tc.chosenField, tc.chosen)
		if err != nil {
			t.Fatal(err)
		}
		var want []rfRow
		for _, o := range tc.chosen {
			want = append(want, rows[base+int(o)])
		}
		fields := tc.chosenField
		if fields == nil {
			fields = ids
		}
		rfCheckRows(t, s, fields, collect(picked, tc.chosenField), want)
		if src.n != read {
			t.Errorf("picking rows of a block read %d bytes of the file", src.n-read)
		}
	}
	for _, tc := range []struct {
		group    int
		first, n int64
		want     string
	}{
		{3, 0, 1, "no row group 3"},
		{0, 200, 51, "are not in row group 0"},
		{0, -1, 2, "are not in row group 0"},
		{0, 0, 0, "are not in row group 0"},
	} {
		if _, err := r.ReadBlock(ctx, tc.group, tc.first, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadBlock(%d, %d, %d) = %v, want an error containing %q", tc.group, tc.first, tc.n, err, tc.want)
		}
	}
	b, err := r.ReadBlock(ctx, 0, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Rows(ctx, nil, []int64{4, 4}); err == nil || !strings.Contains(err.Error(), "must ascend") {
		t.Errorf("Rows with a repeated row: %v", err)
	}
	if _, err := b.Rows(ctx, []int{99999}, nil); err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Errorf("Rows of an unknown field: %v", err)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	*bytes.Reader
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.Reader.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}
