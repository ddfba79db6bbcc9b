package format

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const rfBenchRows = 1 << 20

// rfBenchBatches are a million entries of the simple index (long key,
// string, _file, _pos) in batches of 8192, as the compactor hands them over.
func rfBenchBatches(b *testing.B, s *IndexSchema) []arrow.RecordBatch {
	b.Helper()
	const batchRows = 8192
	var out []arrow.RecordBatch
	rows := make([]rfRow, 0, batchRows)
	for i := range rfBenchRows {
		rows = append(rows, rfRow{
			1:        int64(i) * 7,
			2:        fmt.Sprintf("customer-%07d", i*31%rfBenchRows),
			rfFileID: fmt.Sprintf("s3://warehouse/db/orders/data/%05d-0-6a1f2b3c.parquet", i/100_000),
			rfPosID:  int64(i % 100_000),
		})
		if len(rows) == batchRows {
			out = append(out, rfBatch(b, memory.DefaultAllocator, s, rows))
			rows = rows[:0]
		}
	}
	return out
}

func BenchmarkRangeFileWrite(b *testing.B) {
	s := rfSimpleIndex(b)
	batches := rfBenchBatches(b, s)
	var size int64
	for b.Loop() {
		w, err := NewRangeFileWriter(io.Discard, s, RangeFileOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, rec := range batches {
			if err := w.Write(rec); err != nil {
				b.Fatal(err)
			}
		}
		e, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		size = e.FileSizeInBytes
	}
	b.ReportMetric(float64(b.N)*rfBenchRows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size), "file-bytes")
}

func BenchmarkRangeFileRead(b *testing.B) {
	s := rfSimpleIndex(b)
	var buf bytes.Buffer
	w, err := NewRangeFileWriter(&buf, s, RangeFileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, rec := range rfBenchBatches(b, s) {
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	for b.Loop() {
		r, err := OpenRangeFile(bytes.NewReader(data), "bench.parquet", s, RangeFileReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var rows int64
		if err := r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		r.Close()
		if rows != rfBenchRows {
			b.Fatalf("read %d rows, want %d", rows, rfBenchRows)
		}
	}
	b.ReportMetric(float64(b.N)*rfBenchRows/b.Elapsed().Seconds(), "rows/s")
}
