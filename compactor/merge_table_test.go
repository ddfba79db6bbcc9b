package compactor

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/extsort"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/verify"
)

// mergeHistory commits appends, deletes (position deletes or deletion
// vectors, equality deletes), an upsert and a rewrite, and returns the
// snapshot ids in order.
func mergeHistory(t *testing.T, tbl *table.Table, formatVersion int) (*table.Table, []int64) {
	var snaps []int64
	note := func(tb *table.Table) *table.Table { snaps = append(snaps, tb.CurrentSnapshot().SnapshotID); return tb }
	tbl, f1 := testtables.Append(t, tbl, testtables.OrderRows(0, 120, 0)...)
	note(tbl)
	tbl, f2 := testtables.Append(t, tbl, testtables.OrderRows(120, 200, 0)...) // at the key tail
	note(tbl)
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(40, 45, 5)...) // duplicates of live keys in the middle
	note(tbl)
	if formatVersion >= 3 {
		tbl, _ = testtables.AddDV(t, tbl, f1[0], 3, 5, 8)
		note(tbl)
		tbl, _ = testtables.AddDV(t, tbl, f1[0], 9)
		note(tbl)
	} else {
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f1[0], Pos: []int64{3, 5, 8}})
		note(tbl)
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f2[0], Pos: []int64{0, 79}})
		note(tbl)
	}
	tbl = note(testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(10)}, []any{int64(11)}, []any{int64(150)}))
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(12)}, []any{int64(151)})
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, testtables.OrderRow(12, 1), testtables.OrderRow(151, 1))
	note(tbl)
	tbl = note(testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{int64(3)}))
	tbl, _ = testtables.Rewrite(t, tbl, f2, testtables.OrderRows(120, 190, 3)...)
	note(tbl)
	return tbl, snaps
}

var mergeDefinitions = []string{
	`{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`,
	`{"name":"by_customer","identity":["customer_id","id"],"materialized":["_file","_pos","name"],"non-materialized":["bucket(8, customer_id)"],"cluster":["bucket(8, customer_id)","customer_id","id"]}`,
	`{"name":"by_id_day","identity":["id"],"materialized":["score"],"non-materialized":["day(ts)"],"cluster":["id"]}`,
}

// snapshotEntries adds the staging records of every live row of snap to s,
// each value prefixed with side.
func snapshotEntries(t *testing.T, tbl *table.Table, snap *table.Snapshot, is *format.IndexSchema, side byte, s *extsort.Sorter) {
	t.Helper()
	schema := lineage.SnapshotSchema(tbl, snap)
	codec := format.NewEntryCodec(is)
	columns, err := tablescan.TopLevelColumns(schema, is.SourceFieldIDs())
	if err != nil {
		t.Fatal(err)
	}
	var row format.Key
	_, err = tablescan.Scan(context.Background(), tbl, snap, tablescan.Options{Columns: columns}, func(src arrow.RecordBatch) error {
		entries, err := format.Entries(memory.DefaultAllocator, is, format.RecordColumns(src, schema))
		if err != nil {
			return err
		}
		defer entries.Release()
		for i := range int(entries.NumRows()) {
			row = codec.Row(row, entries, i)
			key, err := codec.AppendKey(nil, row)
			if err != nil {
				return err
			}
			value, err := codec.AppendValue([]byte{side}, row)
			if err != nil {
				return err
			}
			if err := s.Add(key, value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type deltaRecord struct {
	key, value []byte
	count      int
}

// expectedDelta is the multiset difference of the entries of two table
// snapshots, in staging-key order: what an index of from needs to become
// one of to.
func expectedDelta(t *testing.T, tbl *table.Table, from, to *table.Snapshot, is *format.IndexSchema) []deltaRecord {
	t.Helper()
	s := extsort.NewSorter(t.TempDir(), 1<<20, nil)
	defer s.Close()
	snapshotEntries(t, tbl, from, is, 0, s)
	snapshotEntries(t, tbl, to, is, 1, s)
	var out []deltaRecord
	var key []byte
	counts := map[string]int{}
	flushKey := func() {
		values := make([]string, 0, len(counts))
		for v, c := range counts {
			if c != 0 {
				values = append(values, v)
			}
		}
		slices.Sort(values)
		for _, v := range values {
			out = append(out, deltaRecord{key: slices.Clone(key), value: []byte(v), count: counts[v]})
		}
		clear(counts)
	}
	err := s.Iterate(func(k, v []byte) error {
		if !bytes.Equal(k, key) {
			flushKey()
			key = append(key[:0], k...)
		}
		if v[0] == 1 {
			counts[string(v[1:])]++
		} else {
			counts[string(v[1:])]--
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	flushKey()
	return out
}

func recordsDelta(recs []deltaRecord) Delta {
	return func(yield func(key, value []byte, count int) bool) error {
		for _, r := range recs {
			if !yield(r.key, r.value, r.count) {
				return nil
			}
		}
		return nil
	}
}

// TestMergeFollowsTableHistory builds an index for the first snapshot of a
// table, then brings it to every later snapshot by merging the difference of
// full scans; verify must find each published snapshot exact.
func TestMergeFollowsTableHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real tables")
	}
	ctx := context.Background()
	forEachMergeIndex(t, func(t *testing.T, f mergeIndex) {
		tbl, snaps, md, loc := f.tbl, f.snaps, f.md, f.loc
		dir := objstore.Join(loc, "data")
		rw := RangeWriterOptions{TargetFileSize: 512, RowGroupRows: 8, BatchRows: 8}
		first := tbl.SnapshotByID(snaps[0])
		built, err := FullBuild(ctx, tbl, first, md, dir, BuildOptions{RangeWriterOptions: rw})
		if err != nil {
			t.Fatal(err)
		}
		if len(built.Entries) < 3 {
			t.Fatalf("the first build should make several range files, got %d", len(built.Entries))
		}
		prev, reused := built.Entries, 0
		for i := 1; i < len(snaps); i++ {
			from, to := tbl.SnapshotByID(snaps[i-1]), tbl.SnapshotByID(snaps[i])
			is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, to))
			if err != nil {
				t.Fatal(err)
			}
			recs := expectedDelta(t, tbl, from, to, is)
			res, err := Merge(ctx, is, prev, recordsDelta(recs), dir, MergeOptions{RangeWriterOptions: rw})
			if err != nil {
				t.Fatalf("merge into snapshot %d: %v", i, err)
			}
			if report := f.publishAndVerify(t, is, res.Entries, to); !report.Exact() {
				t.Fatalf("after commit %d (%d mutations, %d rewritten, %d reused):\n%s", i, len(recs), res.Rewritten, res.Reused, report.Summary())
			}
			prev = res.Entries
			reused += res.Reused
		}
		if reused == 0 {
			t.Error("no merge reused a range file: every commit rewrote the whole index")
		}
	})
}

// mergeIndex is one index of mergeDefinitions, created in an index
// catalog of its own over the mergeHistory table of one format version.
type mergeIndex struct {
	tbl     *table.Table
	snaps   []int64
	indexes *indexcatalog.FSCatalog
	ident   table.Identifier
	name    string
	md      *format.Metadata
	loc     string
}

// publishAndVerify publishes entries as the index snapshot of table
// snapshot snap and verifies it against the table.
func (f mergeIndex) publishAndVerify(t *testing.T, is *format.IndexSchema, entries []format.TrackingEntry, snap *table.Snapshot) *verify.Report {
	t.Helper()
	ctx := context.Background()
	published, _, err := flush.Publish(ctx, f.indexes, flush.Publication{Table: f.ident, Index: f.name, IndexUUID: f.md.IndexUUID,
		Schema: is, Entries: entries, SourceSnapshotID: snap.SnapshotID}, flush.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := f.indexes.Load(ctx, f.ident, f.name)
	if err != nil {
		t.Fatal(err)
	}
	report, err := verify.Verify(ctx, f.tbl, cur, published, verify.Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return report
}

// forEachMergeIndex runs fn for every index of mergeDefinitions on tables
// of format versions 2 and 3, each a subtest.
func forEachMergeIndex(t *testing.T, fn func(t *testing.T, f mergeIndex)) {
	ctx := context.Background()
	for _, fv := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			cat, _ := testtables.NewCatalog(t)
			tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: fv, RowGroupRows: 16})
			tbl, snaps := mergeHistory(t, tbl, fv)
			indexes, err := indexcatalog.NewFS("file://" + filepath.ToSlash(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			ident := table.Identifier{testtables.Namespace, "orders"}
			for _, def := range mergeDefinitions {
				d, err := indexdef.Parse([]byte(def))
				if err != nil {
					t.Fatal(err)
				}
				t.Run(d.Name, func(t *testing.T) {
					loc, err := indexes.IndexLocation(ident, d.Name)
					if err != nil {
						t.Fatal(err)
					}
					md, err := d.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), loc)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := indexes.Create(ctx, ident, d.Name, md); err != nil {
						t.Fatal(err)
					}
					fn(t, mergeIndex{tbl: tbl, snaps: snaps, indexes: indexes, ident: ident, name: d.Name, md: md, loc: loc})
				})
			}
		})
	}
}
