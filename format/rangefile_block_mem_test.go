package format

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestBlockBytesAreItsMemory: the blocks of a range file, held, take the
// heap that their Bytes say (the lookup cache's budget counts by it), and
// hold only their rows: a block that kept the reader's buffers, sized for
// its batches, held twice what it counted.
func TestBlockBytesAreItsMemory(t *testing.T) {
	s := rfSimpleIndex(t)
	var rows []rfRow
	for i := range 300000 {
		rows = append(rows, rfRow{1: int64(i), 2: "n", rfFileID: fmt.Sprintf("s3://b/data/f%d.parquet", i%3), rfPosID: int64(i)})
	}
	data, _ := rfWrite(t, memory.DefaultAllocator, s, rows, RangeFileOptions{})
	r, err := OpenRangeFile(bytes.NewReader(data), "mem://m.parquet", s, RangeFileReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := compute.WithAllocator(context.Background(), memory.DefaultAllocator)
	var blocks []*Block
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	var counted int64
	for g := range r.NumRowGroups() {
		pages, err := r.PageStats(g, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pages {
			b, err := r.ReadBlock(ctx, g, p.FirstRow, p.Rows)
			if err != nil {
				t.Fatal(err)
			}
			counted += b.Bytes()
			blocks = append(blocks, b)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	grew := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc)
	ratio := float64(grew) / float64(counted)
	t.Logf("%d blocks, counted %d bytes, heap grew %d bytes (%.2fx), %.1f bytes a row", len(blocks), counted, grew, ratio, float64(grew)/float64(len(rows)))
	if ratio < 0.8 || ratio > 1.3 {
		t.Errorf("%d blocks hold %d bytes of heap and count %d (%.2fx): want their count within 0.8-1.3x of what they hold", len(blocks), grew, counted, ratio)
	}
	// A row holds an 8-byte key, an 8-byte position, a 4-byte dictionary
	// index of its file and one of its name: about 24 bytes.
	if perRow := float64(grew) / float64(len(rows)); perRow > 40 {
		t.Errorf("blocks hold %.1f bytes a row, want under 40", perRow)
	}
	runtime.KeepAlive(blocks)
}
