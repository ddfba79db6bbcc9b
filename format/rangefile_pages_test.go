package format

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestPageStatsBoundTheirRows(t *testing.T) {
	s := rfSimpleIndex(t)
	var rows []rfRow
	for i := range 20000 {
		rows = append(rows, rfRow{1: int64(i * 3), 2: fmt.Sprintf("name-%d", i), rfFileID: "s3://b/data/f.parquet", rfPosID: int64(i)})
	}
	mem := memory.DefaultAllocator
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 8192, PageSizeBytes: 1024})
	r := rfOpen(t, mem, data, s)
	row := 0
	for g := range r.NumRowGroups() {
		pages, err := r.PageStats(g, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(pages) < 2 {
			t.Fatalf("row group %d has %d pages; a 1 KiB page size should give several", g, len(pages))
		}
		n, _ := r.RowGroupStats(g)
		var sum int64
		for i, p := range pages {
			if p.FirstRow != sum {
				t.Fatalf("row group %d page %d starts at %d, want %d", g, i, p.FirstRow, sum)
			}
			lo, hi := p.Stats.LowerBound.(int64), p.Stats.UpperBound.(int64)
			first, last := rows[row+int(p.FirstRow)][1].(int64), rows[row+int(p.FirstRow+p.Rows-1)][1].(int64)
			if lo != first || hi != last {
				t.Errorf("row group %d page %d bounds [%d, %d], rows hold [%d, %d]", g, i, lo, hi, first, last)
			}
			sum += p.Rows
		}
		if sum != n {
			t.Errorf("row group %d: pages hold %d rows, the group %d", g, sum, n)
		}
		row += int(n)
	}
	// Strings may have truncated page bounds: none are given.
	pages, err := r.PageStats(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if pages[0].Stats.LowerBound != nil {
		t.Errorf("string page bounds should not be trusted: %v", pages[0].Stats.LowerBound)
	}
	if _, err := r.PageStats(0, 99); err == nil {
		t.Error("a field that is not stored should be an error")
	}
}
