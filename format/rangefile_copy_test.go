package format

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// TestThriftCompactRoundTrip decodes the footer the Parquet writer wrote
// and encodes it again: the bytes must be the same.
func TestThriftCompactRoundTrip(t *testing.T) {
	s := rfSimpleIndex(t)
	data, _ := rfWrite(t, memory.DefaultAllocator, s, rfRandomRows(s, 1, 500), RangeFileOptions{RowGroupRows: 100, PageSizeBytes: 256})
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	footer := data[len(data)-8-n : len(data)-8]
	fm, used, err := readStruct(footer)
	if err != nil {
		t.Fatal(err)
	}
	if used != len(footer) {
		t.Fatalf("decoded %d of the footer's %d bytes", used, len(footer))
	}
	if again := appendStruct(nil, fm); !bytes.Equal(again, footer) {
		t.Fatalf("the footer encoded again differs: %d bytes, was %d", len(again), len(footer))
	}
	if rgs, _ := fieldList(fm, fmRowGroups); len(rgs) != 5 {
		t.Fatalf("%d row groups in the footer, want 5", len(rgs))
	}
}

func FuzzThriftCompact(f *testing.F) {
	s := rfSimpleIndex(f)
	data, _ := rfWrite(f, memory.DefaultAllocator, s, rfRandomRows(s, 1, 50), RangeFileOptions{})
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	f.Add(data[len(data)-8-n : len(data)-8])
	f.Add([]byte{0x19, 0xfc, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, used, err := readStruct(b)
		if err != nil {
			return
		}
		// What decodes encodes again to what decodes the same.
		again := appendStruct(nil, s)
		s2, _, err := readStruct(again)
		if err != nil {
			t.Fatalf("re-encoded %x (from %x) does not decode: %v", again, b[:used], err)
		}
		if !bytes.Equal(appendStruct(nil, s2), again) {
			t.Fatalf("encoding is not stable for %x", b[:used])
		}
	})
}

// TestCopyRowGroupAssemblesAReadableFile writes a file through the Parquet
// writer with row groups of another file copied among its own and reads
// it back: every entry, in order, the tracking entry's statistics those of
// the entries, and seeks through the page indexes of copied row groups.
func TestCopyRowGroupAssemblesAReadableFile(t *testing.T) {
	// A key of one field comes from the row groups' statistics, one of
	// two is read from their first and last entries.
	t.Run("key id", func(t *testing.T) { testCopyRowGroup(t, rfSimpleIndex(t)) })
	t.Run("key id, name", func(t *testing.T) { testCopyRowGroup(t, rfSimpleIndexOf(t, iceberg.PrimitiveTypes.Int64, 1, 2)) })
}

func testCopyRowGroup(t *testing.T, s *IndexSchema) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	// Without null keys, so that a key of one field comes from the
	// statistics.
	rows := slices.DeleteFunc(rfRandomRows(s, 7, 2400), func(r rfRow) bool { return r[1] == nil })
	if len(rows) < 1100 {
		t.Fatalf("%d rows", len(rows))
	}
	srcData, _ := rfWrite(t, mem, s, rows[:1000], RangeFileOptions{RowGroupRows: 100, PageSizeBytes: 256})
	src := rfOpen(t, mem, srcData, s)

	var out bytes.Buffer
	w, err := NewRangeFileWriter(&out, s, RangeFileOptions{RowGroupRows: 100, PageSizeBytes: 256, Allocator: mem, CopyRowGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	write := func(part []rfRow) {
		rec := rfBatch(t, mem, s, part)
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	copyGroup := func(g int) {
		if err := w.CopyRowGroup(context.Background(), src, g); err != nil {
			t.Fatalf("copy row group %d: %v", g, err)
		}
	}
	var want []rfRow
	write(rows[:150]) // rows of row groups 0 and 1 of the source, written again
	want = append(want, rows[:150]...)
	copyGroup(2)
	want = append(want, rows[200:300]...)
	write(rows[300:350])
	want = append(want, rows[300:350]...)
	copyGroup(4)
	copyGroup(5)
	want = append(want, rows[400:600]...)
	write(rows[1000:1100])
	want = append(want, rows[1000:1100]...)
	// A row group that belongs before what was written is refused.
	if err := w.CopyRowGroup(context.Background(), src, 0); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("copying row group 0 at the end: %v, want ErrOutOfOrder", err)
	}
	entry, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	data := out.Bytes()
	if entry.FileSizeInBytes != int64(len(data)) || entry.RecordCount != int64(len(want)) {
		t.Fatalf("tracking entry: %d bytes, %d entries; the file has %d bytes, %d entries written", entry.FileSizeInBytes, entry.RecordCount, len(data), len(want))
	}
	r := rfOpen(t, mem, data, s)
	rfCheckRows(t, s, nil, rfReadRows(t, r, s, nil, nil), want)
	rfCheckStats(t, s, entry.Stats, rfExpectedStats(s, want))
	if r.NumRowGroups() < 6 {
		t.Fatalf("%d row groups, want 6 at least (three copied)", r.NumRowGroups())
	}
	var before int64
	for g := range r.NumRowGroups() {
		n, _ := r.RowGroupStats(g)
		key, err := r.ClusterKey(context.Background(), s, g, n-1)
		if err != nil {
			t.Fatalf("row group %d: %v", g, err)
		}
		if got, want := key, rfKey(s, want[before+n-1]); CompareKeys(s.ClusterTypes(), got, want) != 0 {
			t.Fatalf("row group %d: last key %v by a seek, %v written", g, got, want)
		}
		before += n
	}

	// A file that ends with a copied row group takes its last key for
	// group_max_value.
	w, err = NewRangeFileWriter(&bytes.Buffer{}, s, RangeFileOptions{RowGroupRows: 100, Allocator: mem, CopyRowGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	write(rows[:50])
	copyGroup(1)
	if entry, err = w.Close(); err != nil {
		t.Fatal(err)
	}
	rfCheckStats(t, s, entry.Stats, rfExpectedStats(s, append(slices.Clone(rows[:50]), rows[100:200]...)))
}

// TestCopyRowGroupRefusesWhatItCannotCopy: an index with computed or float
// fields, a writer not made for it, a file of another Parquet schema.
func TestCopyRowGroupRefusesWhatItCannotCopy(t *testing.T) {
	mem := memory.DefaultAllocator
	all := rfAllTypesIndex(t)
	if CanCopyRowGroups(all) {
		t.Fatal("an index with a non-materialized field and floats can copy row groups")
	}
	s := rfSimpleIndex(t)
	rows := rfRandomRows(s, 3, 300)
	srcData, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 100})
	src := rfOpen(t, mem, srcData, s)
	refused := func(name string, opts RangeFileOptions, why string) {
		t.Helper()
		w, err := NewRangeFileWriter(&bytes.Buffer{}, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		err = w.CopyRowGroup(context.Background(), src, 0)
		if !errors.Is(err, ErrCannotCopyRowGroup) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want ErrCannotCopyRowGroup: %s", name, err, why)
		}
	}
	refused("a writer not made to copy", RangeFileOptions{}, "not made to copy")
	// A file of another Parquet schema: one written before the key's type
	// was promoted from int to long.
	narrow := rfSimpleIndexOf(t, iceberg.PrimitiveTypes.Int32, 1)
	narrowData, _ := rfWrite(t, mem, narrow, rfRandomRows(narrow, 3, 300), RangeFileOptions{RowGroupRows: 100})
	src = rfOpen(t, mem, narrowData, s)
	refused("a file written before a type promotion", RangeFileOptions{CopyRowGroups: true}, "Parquet schema")
}

var rfCopiedSamplePath = filepath.Join("testdata", "rangefile_copied_sample.parquet")

// rfWriteCopiedSample writes a range file of row groups written and copied
// in turn, and returns it with its entries.
func rfWriteCopiedSample(t *testing.T) ([]byte, []rfRow) {
	t.Helper()
	mem := memory.NewGoAllocator()
	s := rfSimpleIndex(t)
	rows := rfRandomRows(s, 11, 60)
	src := rfOpen(t, mem, func() []byte { d, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 20}); return d }(), s)
	var out bytes.Buffer
	w, err := NewRangeFileWriter(&out, s, RangeFileOptions{RowGroupRows: 20, Allocator: mem, CopyRowGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := rfBatch(t, mem, s, rows[:20])
	err = w.Write(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for g := 1; g < 3; g++ {
		if err := w.CopyRowGroup(context.Background(), src, g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), rows
}

// TestCopiedSampleRangeFile rewrites the golden file of copied row groups
// under -update (make crosscheck has DuckDB read it); otherwise it reads
// the golden file back.
func TestCopiedSampleRangeFile(t *testing.T) {
	data, rows := rfWriteCopiedSample(t)
	if *rfUpdate {
		if err := os.WriteFile(rfCopiedSamplePath, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(rfCopiedSamplePath)
	if err != nil {
		t.Fatal(err)
	}
	s := rfSimpleIndex(t)
	r := rfOpen(t, memory.DefaultAllocator, golden, s)
	if r.NumRowGroups() != 3 {
		t.Fatalf("%d row groups, want 3", r.NumRowGroups())
	}
	rfCheckRows(t, s, nil, rfReadRows(t, r, s, nil, nil), rows)
}

// TestCopyRowGroupKeepsStatisticsOfEveryType copies every row group of a
// file whose index stores a field of each type a copy allows (every
// primitive but float and double, edge values included: negative decimals
// of every width, UUIDs and binaries with the high bit set, empty strings)
// and checks the tracking entry's statistics against those computed from
// the entries: the Parquet statistics the copy takes in must order values
// as Iceberg does.
func TestCopyRowGroupKeepsStatisticsOfEveryType(t *testing.T) {
	s := rfTypesIndexWith(t, func(typ iceberg.Type) bool {
		switch typ.(type) {
		case iceberg.Float32Type, iceberg.Float64Type:
			return false
		}
		return true
	}, false, rfBucketID, 3)
	if !CanCopyRowGroups(s) {
		t.Fatal("the index cannot copy row groups")
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rows := rfRandomRows(s, 5, 600)
	srcData, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 100})
	src := rfOpen(t, mem, srcData, s)
	var out bytes.Buffer
	w, err := NewRangeFileWriter(&out, s, RangeFileOptions{RowGroupRows: 100, Allocator: mem, CopyRowGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	for g := range src.NumRowGroups() {
		if err := w.CopyRowGroup(context.Background(), src, g); err != nil {
			t.Fatalf("copy row group %d: %v", g, err)
		}
	}
	entry, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	rfCheckStats(t, s, entry.Stats, rfExpectedStats(s, rows))
	rfCheckRows(t, s, nil, rfReadRows(t, rfOpen(t, mem, out.Bytes(), s), s, nil, nil), rows)
}
