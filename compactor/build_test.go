package compactor

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/extsort"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestFullBuildWorkersAgree builds each index of a table with a history of
// duplicate keys across data files, position deletes or deletion vectors,
// equality deletes and a rewrite: with one worker and the sort in memory,
// and with three workers whose sorts spill. Both must write exactly the
// entries of the table's live rows in staging-key order, computed here from
// a serial scan with the data files' paths (the build sorts by the paths'
// ranks), and verify must find the parallel build exact.
func TestFullBuildWorkersAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real tables")
	}
	ctx := context.Background()
	forEachMergeIndex(t, func(t *testing.T, f mergeIndex) {
		tbl, md, loc := f.tbl, f.md, f.loc
		snap := tbl.CurrentSnapshot()
		is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, snap))
		if err != nil {
			t.Fatal(err)
		}
		want := expectedEntries(t, tbl, is)
		rw := RangeWriterOptions{TargetFileSize: 512, RowGroupRows: 8, BatchRows: 8}
		serial, err := FullBuild(ctx, tbl, snap, md, objstore.Join(loc, "serial"), BuildOptions{RangeWriterOptions: rw, Workers: 1, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		parallel, err := FullBuild(ctx, tbl, snap, md, objstore.Join(loc, "data"), BuildOptions{RangeWriterOptions: rw, Workers: 3,
			MemoryBudget: 8 << 10, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if serial.Spilled || !parallel.Spilled {
			t.Fatalf("spilled: serial %v, parallel %v; the test wants only the parallel sort to spill", serial.Spilled, parallel.Spilled)
		}
		if len(parallel.Entries) < 3 {
			t.Fatalf("the build should make several range files, got %d", len(parallel.Entries))
		}
		for name, res := range map[string]*BuildResult{"serial": serial, "parallel": parallel} {
			if got := storedEntries(t, is, res.Entries); !slices.Equal(got, want) {
				t.Errorf("%s build wrote %d entries:\n%s\nwant %d:\n%s", name, len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
			}
			if res.Rows != int64(len(want)) || res.Scan.RowsLive != int64(len(want)) {
				t.Errorf("%s build counts %d rows, scanned %d live, want %d", name, res.Rows, res.Scan.RowsLive, len(want))
			}
		}
		if serial.Scan != parallel.Scan {
			t.Errorf("scan counts differ: serial %+v, parallel %+v", serial.Scan, parallel.Scan)
		}
		if report := f.publishAndVerify(t, is, parallel.Entries, snap); !report.Exact() {
			t.Fatalf("parallel build:\n%s", report.Summary())
		}
	})
}

// expectedEntries renders the stored fields of the entries of every live
// row of tbl's current snapshot in staging-key order, keyed with the data
// files' paths.
func expectedEntries(t *testing.T, tbl *table.Table, is *format.IndexSchema) []string {
	t.Helper()
	s := extsort.NewSorter(t.TempDir(), 64<<20, nil)
	defer s.Close()
	snapshotEntries(t, tbl, tbl.CurrentSnapshot(), is, 0, s)
	codec := format.NewEntryCodec(is)
	var out []string
	err := s.Iterate(func(_, v []byte) error {
		entry, err := codec.DecodeValue(v[1:])
		if err != nil {
			return err
		}
		out = append(out, renderStored(is, entry))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storedEntries renders the entries of range files, in order.
func storedEntries(t *testing.T, is *format.IndexSchema, files []format.TrackingEntry) []string {
	t.Helper()
	var out []string
	for _, te := range files {
		r, err := objstore.Local().OpenRange(context.Background(), &te, is, format.RangeFileReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
			for row := range int(rec.NumRows()) {
				entry := make(format.Key, len(is.Fields()))
				col := 0
				for i, f := range is.Fields() {
					if f.Stored() {
						entry[i] = format.ValueAtAs(f.Type, rec.Column(col), row)
						col++
					}
				}
				out = append(out, renderStored(is, entry))
			}
			return nil
		})
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func renderStored(is *format.IndexSchema, entry format.Key) string {
	var parts []string
	for i, f := range is.Fields() {
		if f.Stored() {
			parts = append(parts, format.FormatValue(f.Type, entry[i]))
		}
	}
	return strings.Join(parts, "|")
}

// TestFullBuildStopsWhenCancelled cancels a build as it starts writing:
// the merge and decoders stop (goleak checks none is left), the build
// returns the cancellation and the range files it finished are removed.
func TestFullBuildStopsWhenCancelled(t *testing.T) {
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 300, 0)...)
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(300, 600, 0)...)
	d, err := indexdef.Parse([]byte(mergeDefinitions[0]))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pk")
	md, err := d.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rw := RangeWriterOptions{TargetFileSize: 256, RowGroupRows: 8, BatchRows: 8}
	_, err = FullBuild(ctx, tbl, tbl.CurrentSnapshot(), md, objstore.Join(md.Location, "data"), BuildOptions{RangeWriterOptions: rw, Workers: 2,
		Progress: func(p BuildProgress) {
			if p.Phase == "write" {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("build returned %v, want the cancellation", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "data", "*.parquet")); len(files) != 0 {
		t.Errorf("a cancelled build left range files: %v", files)
	}
}

// The _file columns of a build's batches go back to the pool once the range
// writer has released them, and the next batches take them again, though
// their sizes differ by a few bytes: without that every batch's paths land
// in fresh memory, page faults and all.
func TestBuildPathBuffersReturnToThePool(t *testing.T) {
	pool := &bufferPool{max: 8}
	paths := []string{"s3://bucket/db/orders/data/00000-a.parquet", "s3://bucket/db/orders/data/00001-bb.parquet"}
	b := &entryBatcher{enc: &recordCodec{paths: paths}, pool: pool,
		schema: arrow.NewSchema([]arrow.Field{{Name: "_file", Type: arrow.BinaryTypes.String}}, nil)}
	for round := range 5 {
		b.ranks = b.ranks[:0]
		dataLen := 0
		for i := range 4096 {
			r := uint32(0)
			if i < 100+round*150 { // 150 more longer paths each round
				r = 1
			}
			b.ranks = append(b.ranks, r)
			dataLen += len(paths[r])
		}
		col, err := b.pathColumn(0, dataLen)
		if err != nil {
			t.Fatal(err)
		}
		s := col.(*array.String)
		for i, r := range b.ranks {
			if s.Value(i) != paths[r] {
				t.Fatalf("round %d row %d: %q, want %q", round, i, s.Value(i), paths[r])
			}
		}
		col.Release()
		if len(pool.free) != 2 {
			t.Fatalf("round %d: %d buffers back in the pool, want 2 (the offsets and the paths, taken again each round)", round, len(pool.free))
		}
	}
}
