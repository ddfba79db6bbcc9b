package format

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestRangeFileReadRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 7, 600)
	// Small pages: a row group spans many, so reading rows seeks.
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 250, PageSizeBytes: 256})
	r, err := OpenRangeFile(bytes.NewReader(data), "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ids := rfStoredIDs(s)
	ctx := context.Background()
	read := func(fieldIDs []int, g int, first, count int64) ([]rfRow, error) {
		want := rfProjectedSchema(t, s, fieldIDs)
		var out []rfRow
		err := r.ReadRows(ctx, fieldIDs, g, first, count, func(rec arrow.RecordBatch) error {
			if !rec.Schema().Equal(want) || rec.NumRows() > 7 {
				t.Errorf("batch of %d rows, schema\n%s", rec.NumRows(), rec.Schema())
			}
			for i := range int(rec.NumRows()) {
				row := rfRow{}
				for c, f := range want.Fields() {
					id, _ := arrowFieldID(f)
					fld, _ := s.Field(id)
					v := ValueAtAs(fld.Type, rec.Column(c), i)
					if str, ok := v.(string); ok {
						v = strings.Clone(str)
					}
					row[id] = v
				}
				out = append(out, row)
			}
			return nil
		})
		return out, err
	}
	for _, tc := range []struct {
		group        int
		first, count int64
	}{{0, 0, 1}, {0, 117, 1}, {1, 249, 1}, {1, 40, 100}, {2, 0, 100}, {0, 0, 250}, {2, 99, 0}} {
		got, err := read(nil, tc.group, tc.first, tc.count)
		if err != nil {
			t.Fatalf("ReadRows(%d, %d, %d): %v", tc.group, tc.first, tc.count, err)
		}
		start := int64(tc.group*250) + tc.first
		rfCheckRows(t, s, ids, got, rows[start:start+tc.count])
	}
	got, err := read([]int{rfPosID, 1}, 1, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	rfCheckRows(t, s, []int{rfPosID, 1}, got, rows[253:255])

	for _, tc := range []struct {
		group        int
		first, count int64
		want         string
	}{{3, 0, 1, "no row group 3"}, {2, 99, 2, "rows [99, 101) are not in row group 2 of 100 rows"}, {0, -1, 1, "are not in"}} {
		if _, err := read(nil, tc.group, tc.first, tc.count); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadRows(%d, %d, %d) = %v, want an error containing %q", tc.group, tc.first, tc.count, err, tc.want)
		}
	}
}
