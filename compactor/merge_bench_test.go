package compactor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// The merge benchmarks use a primary-key index (id; _file and _pos
// materialized; clustered by id) of STREAMIDX_BENCH_ROWS entries (default
// 200000) whose _file values are data file paths as Iceberg writers name
// them (long, a new one every 250,000 rows), in range files of
// STREAMIDX_BENCH_TARGET bytes or STREAMIDX_BENCH_ENTRIES entries (default
// 16 KiB or 131072) with row groups of
// STREAMIDX_BENCH_ROW_GROUP rows (default 8192, so that a small index still
// has many files). They change rows by upsert (a delete of the old entry
// and an insert at a new location): BenchmarkMergeTail and
// BenchmarkMergeUniform one row in STREAMIDX_BENCH_EVERY (default 100).
// The index and changes of `streamidx bench --only incremental` (1M rows)
// are STREAMIDX_BENCH_ROWS=1000000 STREAMIDX_BENCH_TARGET=250000
// STREAMIDX_BENCH_ROW_GROUP=131072 STREAMIDX_BENCH_EVERY=1000.

func benchEnvInt(b *testing.B, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func pkBenchSchema(b *testing.B) *format.IndexSchema {
	source := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	md := &format.Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: format.TypeScalar,
		IdentityFields: []int{1},
		MaterializedFields: []format.ExprField{
			{FieldID: 1000, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.Ref{ID: format.FieldIDFile}},
			{FieldID: 1001, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: format.Ref{ID: format.FieldIDPos}},
		},
		ClusterSpec: []int{1}}
	return validIndexSchema(b, md, source)
}

// benchEntry is row i of the generated table as written by generation gen.
func benchEntry(i int64, gen int) format.Key {
	const rowsPerFile = 250000
	return format.Key{i, fmt.Sprintf("s3://warehouse/bench.db/orders/data/%05d-%d-028a47ac-039f-4aea-8752-9b6c8328c6ac-00001.parquet",
		i/rowsPerFile, gen), i % rowsPerFile}
}

type benchIndex struct {
	is      *format.IndexSchema
	dir     string
	opts    MergeOptions
	rows    int64
	entries []format.TrackingEntry
	bytes   int64
}

func newBenchIndex(b *testing.B) *benchIndex {
	b.Helper()
	x := &benchIndex{is: pkBenchSchema(b), dir: "file://" + filepath.ToSlash(b.TempDir()), rows: benchEnvInt(b, "STREAMIDX_BENCH_ROWS", 200000)}
	x.opts = MergeOptions{RangeWriterOptions: RangeWriterOptions{TargetFileSize: benchEnvInt(b, "STREAMIDX_BENCH_TARGET", 16<<10),
		TargetFileEntries: benchEnvInt(b, "STREAMIDX_BENCH_ENTRIES", DefaultTargetFileEntries), RowGroupRows: int(benchEnvInt(b, "STREAMIDX_BENCH_ROW_GROUP", 8192))}}
	w, err := NewRangeWriter(context.Background(), x.is, x.dir, x.opts.RangeWriterOptions)
	if err != nil {
		b.Fatal(err)
	}
	for i := range x.rows {
		if err := w.Add(benchEntry(i, 0)); err != nil {
			b.Fatal(err)
		}
	}
	if x.entries, err = w.Close(); err != nil {
		b.Fatal(err)
	}
	for _, e := range x.entries {
		x.bytes += e.FileSizeInBytes
	}
	return x
}

// upserts encodes, in staging-key order, a delete and an insert for each
// changed row.
func (x *benchIndex) upserts(b *testing.B, changed []int64) []deltaRecord {
	codec := format.NewEntryCodec(x.is)
	var recs []deltaRecord
	for _, i := range changed {
		for _, m := range []struct {
			gen, count int
		}{{0, -1}, {1, 1}} {
			e := benchEntry(i, m.gen)
			k, err := codec.AppendKey(nil, e)
			if err != nil {
				b.Fatal(err)
			}
			v, err := codec.AppendValue(nil, e)
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, deltaRecord{k, v, m.count})
		}
	}
	return recs
}

// cpuTime is the CPU time the process has used: on a machine shared with
// other work it measures a merge better than the wall clock.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (x *benchIndex) run(b *testing.B, recs []deltaRecord) {
	var res *MergeResult
	var cpu time.Duration
	x.opts.DeltaRecords = int64(len(recs)) // as the updater tells it
	for b.Loop() {
		began := cpuTime(b)
		var err error
		res, err = Merge(context.Background(), x.is, x.entries, recordsDelta(recs), x.dir, x.opts)
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b) - began
		b.StopTimer()
		for _, e := range res.Entries {
			if !containsPath(x.entries, e.FilePath) {
				RemoveFiles(context.Background(), objstore.Local(), nil, []format.TrackingEntry{e})
			}
		}
		b.StartTimer()
	}
	var rewritten int64 // entries written to new files
	for _, e := range res.Entries {
		if !containsPath(x.entries, e.FilePath) {
			rewritten += e.RecordCount
		}
	}
	b.ReportMetric(float64(rewritten)/(b.Elapsed().Seconds()/float64(b.N)), "entries/s")
	b.ReportMetric(float64(rewritten)/(cpu.Seconds()/float64(b.N)), "entries/cpu-s")
	b.ReportMetric(float64(len(x.entries)), "files")
	b.ReportMetric(float64(res.Rewritten), "rewritten")
	b.ReportMetric(float64(res.Reused), "reused")
	b.ReportMetric(float64(res.BytesWritten), "bytes-written")
	b.ReportMetric(float64(res.BytesWritten)/float64(x.bytes), "fraction-of-full")
	b.ReportMetric(float64(res.RowGroupsCopied), "row-groups-copied")
}

func containsPath(entries []format.TrackingEntry, path string) bool {
	for _, e := range entries {
		if e.FilePath == path {
			return true
		}
	}
	return false
}

// BenchmarkMergeTail changes the rows with the highest keys.
func BenchmarkMergeTail(b *testing.B) {
	x := newBenchIndex(b)
	n := max(x.rows/benchEnvInt(b, "STREAMIDX_BENCH_EVERY", 100), 1)
	var changed []int64
	for i := x.rows - n; i < x.rows; i++ {
		changed = append(changed, i)
	}
	x.run(b, x.upserts(b, changed))
}

// BenchmarkMergeRowGroups is BenchmarkMergeTail and BenchmarkMergeUniform
// with the untouched row groups of the rewritten files copied as they are
// (copy, the default) and decoded and encoded again (decode): set
// STREAMIDX_BENCH_ROW_GROUP below the entries of a file (131072 by
// default) for files of several row groups.
func BenchmarkMergeRowGroups(b *testing.B) {
	for _, pattern := range []string{"tail", "uniform"} {
		for _, decode := range []bool{false, true} {
			name := pattern + "/copy"
			if decode {
				name = pattern + "/decode"
			}
			b.Run(name, func(b *testing.B) {
				x := newBenchIndex(b)
				x.opts.DecodeAllRowGroups = decode
				every := benchEnvInt(b, "STREAMIDX_BENCH_EVERY", 100)
				var changed []int64
				if pattern == "tail" {
					for i := x.rows - max(x.rows/every, 1); i < x.rows; i++ {
						changed = append(changed, i)
					}
				} else {
					for i := every / 2; i < x.rows; i += every {
						changed = append(changed, i)
					}
				}
				x.run(b, x.upserts(b, changed))
			})
		}
	}
}

// BenchmarkMergeUniform changes rows spread evenly over the keys.
func BenchmarkMergeUniform(b *testing.B) {
	x := newBenchIndex(b)
	every := benchEnvInt(b, "STREAMIDX_BENCH_EVERY", 100)
	var changed []int64
	for i := every / 2; i < x.rows; i += every {
		changed = append(changed, i)
	}
	x.run(b, x.upserts(b, changed))
}

// BenchmarkMergeFullRewrite writes the whole index again, the cost a merge
// is compared with.
func BenchmarkMergeFullRewrite(b *testing.B) {
	x := newBenchIndex(b)
	var bytes int64
	for b.Loop() {
		w, err := NewRangeWriter(context.Background(), x.is, x.dir, x.opts.RangeWriterOptions)
		if err != nil {
			b.Fatal(err)
		}
		for i := range x.rows {
			gen := 0
			if i%100 == 50 {
				gen = 1
			}
			if err := w.Add(benchEntry(i, gen)); err != nil {
				b.Fatal(err)
			}
		}
		entries, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		bytes = w.BytesWritten()
		b.StopTimer()
		RemoveFiles(context.Background(), objstore.Local(), nil, entries)
		b.StartTimer()
	}
	b.ReportMetric(float64(len(x.entries)), "files")
	b.ReportMetric(float64(bytes), "bytes-written")
}

// BenchmarkMergeUniformSpread changes every n-th row for shrinking n: the
// delta of an updater that skips commits of uniformly spread upserts grows
// with the commits it skips, while the index it rewrites stays the same.
// The merge's cost should follow the entries it writes, not the changes.
func BenchmarkMergeUniformSpread(b *testing.B) {
	for _, every := range []int64{100, 20, 4} {
		b.Run(fmt.Sprintf("every-%d", every), func(b *testing.B) {
			x := newBenchIndex(b)
			var changed []int64
			for i := every / 2; i < x.rows; i += every {
				changed = append(changed, i)
			}
			x.run(b, x.upserts(b, changed))
		})
	}
}
