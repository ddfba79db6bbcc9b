package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/planner/reconcile"
)

// benchRows is the table size of BenchmarkLookup: STREAMIDX_BENCH_ROWS,
// default 100,000, small enough to set up in seconds.
func benchRows(b *testing.B) int {
	if s := os.Getenv("STREAMIDX_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 20_000 {
			b.Fatalf("STREAMIDX_BENCH_ROWS=%q: want a number of at least 20000", s)
		}
		return n
	}
	return 100_000
}

var benchSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 3, Name: "note", Type: iceberg.PrimitiveTypes.String},
)

// benchKey is row i's id: a permutation of [0, n), so ids are unique and
// every data file holds ids from the whole range, as keys that are not
// the table's sort order do; file statistics cannot narrow a scan.
func benchKey(i, n int) int64 {
	p := 1_000_003
	for gcd(p, n) != 1 {
		p += 2
	}
	return int64((i*p + 7) % n)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// BenchmarkLookup measures a one-key lookup and a 10,000-key IN lookup on
// a table of STREAMIDX_BENCH_ROWS rows in 10 data files, through a pk index
// (cluster id; _file and _pos materialized; 1 MiB range files of 16Ki-row
// row groups) and through iceberg-go's filtered scan, in the same run. Per
// lookup it reports range files, row groups and bytes read; the tracking
// file is cached after the first lookup, as in a long-running process.
func BenchmarkLookup(b *testing.B) {
	n := benchRows(b)
	cat, _ := testtables.NewCatalog(b)
	tbl := testtables.CreateTable(b, cat, testtables.TableConfig{Name: "bench", Schema: benchSchema, FormatVersion: 2})
	const files = 10
	var dataFiles []iceberg.DataFile
	for f := range files {
		var rows [][]any
		for i := f * n / files; i < (f+1)*n/files; i++ {
			id := benchKey(i, n)
			rows = append(rows, []any{id, id % 1000, fmt.Sprintf("note %d", i)})
		}
		var added []iceberg.DataFile
		tbl, added = testtables.Append(b, tbl, rows...)
		dataFiles = append(dataFiles, added...)
	}
	def, err := indexdef.Parse([]byte(`{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`))
	if err != nil {
		b.Fatal(err)
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), strings.TrimRight(tbl.Location(), "/")+"/indexes/pk")
	if err != nil {
		b.Fatal(err)
	}
	isnap := buildIndex(b, tbl, md, tbl.CurrentSnapshot(), compactor.RangeWriterOptions{TargetFileSize: 1 << 20, RowGroupRows: 16 << 10})
	p := New(Options{})

	rng := rand.New(rand.NewPCG(1, 2))
	point := make([]int64, 1024)
	for i := range point {
		point[i] = int64(rng.IntN(n))
	}
	keys := make([]int64, 10_000)
	for i, k := range rng.Perm(n)[:len(keys)] {
		keys[i] = int64(k)
	}
	inList := make([]string, len(keys))
	for i, k := range keys {
		inList[i] = strconv.FormatInt(k, 10)
	}
	inWhere := "id IN (" + strings.Join(inList, ", ") + ")"

	b.Run("point/index", func(b *testing.B) {
		benchIndex(b, p, tbl, md, func(i int) string { return fmt.Sprintf("id = %d", point[i%len(point)]) }, 1)
	})
	b.Run("point/scan", func(b *testing.B) {
		benchScan(b, tbl, func(i int) iceberg.BooleanExpression {
			return iceberg.EqualTo(iceberg.Reference("id"), point[i%len(point)])
		}, 1)
	})
	b.Run("in10k/index", func(b *testing.B) {
		benchIndex(b, p, tbl, md, func(int) string { return inWhere }, int64(len(keys)))
	})
	b.Run("in10k/scan", func(b *testing.B) {
		benchScan(b, tbl, func(int) iceberg.BooleanExpression { return iceberg.IsIn(iceberg.Reference("id"), keys...) }, int64(len(keys)))
	})
	// The live positions of two of the data files, as rewrite-deletes asks
	// for those its deletes touch: every entry of the index is read.
	b.Run("live_positions/index", func(b *testing.B) {
		ctx := context.Background()
		is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.CurrentSnapshot()))
		if err != nil {
			b.Fatal(err)
		}
		tr, _, err := objstore.Local().ReadTracking(ctx, md, isnap, is)
		if err != nil {
			b.Fatal(err)
		}
		r := NewSnapshotReader(objstore.Local(), is, tr.Entries)
		// The data files' keys are spread over the whole key range: their
		// bounds prune nothing.
		wanted := map[string]*KeyBounds{dataFiles[0].FilePath(): r.KeyBoundsOf(dataFiles[0]), dataFiles[len(dataFiles)-1].FilePath(): r.KeyBoundsOf(dataFiles[len(dataFiles)-1])}
		b.ResetTimer()
		for range b.N {
			live, err := r.LivePositions(ctx, wanted)
			if err != nil {
				b.Fatal(err)
			}
			var found uint64
			for _, bm := range live {
				found += bm.GetCardinality()
			}
			if want := uint64(2 * n / files); found != want {
				b.Fatalf("%d live positions, want %d", found, want)
			}
		}
		b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "entries/s")
	})
}

func benchIndex(b *testing.B, p *Planner, tbl *table.Table, md *format.Metadata, where func(int) string, rows int64) {
	ctx := context.Background()
	var files, groups, bytes int64
	b.ResetTimer()
	for i := range b.N {
		res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where(i)})
		if err != nil {
			b.Fatal(err)
		}
		if res.NumRows() != rows {
			b.Fatalf("%d rows, want %d", res.NumRows(), rows)
		}
		files += int64(res.Stats.RangeFilesRead)
		groups += int64(res.Stats.RowGroupsRead)
		bytes += res.Stats.BytesRead + res.Stats.TrackingBytesRead
		if i == 0 {
			b.ReportMetric(float64(res.Stats.RangeFilesTotal), "range_files_total")
		}
		res.Release()
	}
	b.ReportMetric(float64(files)/float64(b.N), "range_files/op")
	b.ReportMetric(float64(groups)/float64(b.N), "row_groups/op")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes_read/op")
}

func benchScan(b *testing.B, tbl *table.Table, filter func(int) iceberg.BooleanExpression, rows int64) {
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		_, batches, err := tbl.Scan(table.WithRowFilter(filter(i))).ToArrowRecords(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		for rec, err := range batches {
			if err != nil {
				b.Fatal(err)
			}
			got += rec.NumRows()
			rec.Release()
		}
		if got != rows {
			b.Fatalf("%d rows, want %d", got, rows)
		}
	}
}
