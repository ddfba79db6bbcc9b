package ingest

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/internal/testtables"
)

const (
	fieldID   = 1
	fieldName = 2
	fieldCat  = 3
)

func deltaSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: fieldID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: fieldName, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: fieldCat, Name: "cat", Type: iceberg.PrimitiveTypes.String},
	)
}

func row(id int64, name any, cat string) []any { return []any{id, name, cat} }

// testIndex is an index definition of the tests and its resolved schema.
type testIndex struct {
	name string
	is   *format.IndexSchema
}

// testIndexes are the shapes the delta must handle: row locations (entries
// never coincide), a bucket and truncate clustering key without locations
// (equal entries coincide and counts add up), and a key that does not
// determine the entry (a materialized value outside the key).
func testIndexes(t *testing.T) []testIndex {
	t.Helper()
	str := iceberg.PrimitiveTypes.String
	defs := []struct {
		name string
		md   format.Metadata
	}{
		{"location", format.Metadata{
			IdentityFields: []int{fieldID},
			MaterializedFields: []format.ExprField{
				{FieldID: 1001, Type: format.ExprFieldType, DataType: str, Expr: format.Ref{ID: format.FieldIDFile}},
				{FieldID: 1002, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: format.Ref{ID: format.FieldIDPos}},
			},
			ClusterSpec: []int{fieldID},
		}},
		{"bucket-truncate", format.Metadata{
			IdentityFields: []int{fieldID, fieldName},
			MaterializedFields: []format.ExprField{
				{FieldID: 1003, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.Int32, Expr: format.NewApply("bucket", format.IntLit(4), format.Ref{ID: fieldID})},
			},
			NonMaterializedFields: []format.ExprField{
				{FieldID: 1004, Type: format.ExprFieldType, DataType: str, Expr: format.NewApply("truncate", format.IntLit(1), format.Ref{ID: fieldName})},
			},
			ClusterSpec: []int{1003, 1004},
		}},
		{"value-outside-key", format.Metadata{
			IdentityFields: []int{fieldCat},
			MaterializedFields: []format.ExprField{
				{FieldID: 1005, Type: format.ExprFieldType, DataType: str, Expr: format.NewApply("truncate", format.IntLit(2), format.Ref{ID: fieldName})},
			},
			ClusterSpec: []int{fieldCat},
		}},
	}
	var out []testIndex
	for _, d := range defs {
		md := d.md
		md.FormatVersion, md.Type, md.Location, md.IndexUUID, md.TableUUID = format.FormatVersion, format.TypeScalar, "file:///idx", "u", "t"
		if err := format.Validate(&md, deltaSchema()); err != nil {
			t.Fatalf("index %s: %v", d.name, err)
		}
		is, err := format.NewIndexSchema(&md, deltaSchema())
		if err != nil {
			t.Fatalf("index %s: %v", d.name, err)
		}
		out = append(out, testIndex{d.name, is})
	}
	return out
}

// fullEntries is the multiset of index entries of a snapshot's live rows,
// by a full scan, keyed by the encoding of all entry values.
func fullEntries(t *testing.T, tbl *table.Table, snap *table.Snapshot, is *format.IndexSchema) map[string]int {
	t.Helper()
	codec := format.NewEntryCodec(is)
	columns, err := tablescan.TopLevelColumns(tbl.Schema(), is.SourceFieldIDs())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var row format.Key
	_, err = tablescan.Scan(context.Background(), tbl, snap, tablescan.Options{Columns: columns}, func(src arrow.RecordBatch) error {
		entries, err := format.Entries(memory.DefaultAllocator, is, format.RecordColumns(src, tbl.Schema()))
		if err != nil {
			return err
		}
		defer entries.Release()
		for i := range int(entries.NumRows()) {
			row = codec.Row(row, entries, i)
			v, err := codec.AppendValue(nil, row)
			if err != nil {
				return err
			}
			out[string(v)]++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("full scan of snapshot: %v", err)
	}
	return out
}

func describe(t *testing.T, codec *format.EntryCodec, enc string) string {
	t.Helper()
	k, err := codec.DecodeValue([]byte(enc))
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(k))
	for i, v := range k {
		parts[i] = format.FormatValue(codec.Types()[i], v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkDelta applies the delta from old to snap to the entries of old and
// requires the entries of snap. It returns the stats of each index.
func checkDelta(t *testing.T, tbl *table.Table, old, snap *table.Snapshot, indexes []testIndex, opts DeltaOptions) map[string]DeltaStats {
	t.Helper()
	out := map[string]DeltaStats{}
	for _, ix := range indexes {
		codec := format.NewEntryCodec(ix.is)
		got := fullEntries(t, tbl, old, ix.is)
		if old == nil {
			got = map[string]int{}
		}
		want := fullEntries(t, tbl, snap, ix.is)
		stats, err := ComputeDelta(context.Background(), tbl, old, snap, ix.is, opts, func(entry format.Key, count int) error {
			if count != 1 && count != -1 {
				t.Errorf("index %s: count %d", ix.name, count)
			}
			v, err := codec.AppendValue(nil, entry)
			if err != nil {
				return err
			}
			k := string(v)
			if count < 0 && got[k] < -count {
				t.Errorf("index %s: delete of %s, which the old index holds %d times", ix.name, describe(t, codec, k), got[k])
			}
			got[k] += count
			if got[k] == 0 {
				delete(got, k)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("index %s: compute delta: %v", ix.name, err)
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			if got[k] != want[k] {
				t.Errorf("index %s: entry %s: %d after the delta, %d in the snapshot", ix.name, describe(t, codec, k), got[k], want[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if _, ok := got[k]; !ok {
				t.Errorf("index %s: entry %s: missing after the delta, %d in the snapshot", ix.name, describe(t, codec, k), want[k])
			}
		}
		out[ix.name] = stats
	}
	return out
}

// checkLast checks the delta of the table's current snapshot from its parent.
func checkLast(t *testing.T, tbl *table.Table, indexes []testIndex, opts DeltaOptions) map[string]DeltaStats {
	t.Helper()
	snap := tbl.CurrentSnapshot()
	var parent *table.Snapshot
	if snap.ParentSnapshotID != nil {
		parent = tbl.SnapshotByID(*snap.ParentSnapshotID)
	}
	return checkDelta(t, tbl, parent, snap, indexes, opts)
}

func newTable(t *testing.T, name string, version int) *table.Table {
	t.Helper()
	cat, _ := testtables.NewCatalog(t)
	return testtables.CreateTable(t, cat, testtables.TableConfig{Name: name, Schema: deltaSchema(), FormatVersion: version, RowGroupRows: 4})
}

// liveRowsOf returns the live rows of one data file in the current
// snapshot, in table schema order, for rewriting it.
func liveRowsOf(t *testing.T, tbl *table.Table, path string) [][]any {
	t.Helper()
	var rows [][]any
	cols := []int{fieldID, fieldName, fieldCat, format.FieldIDFile}
	_, err := tablescan.Scan(context.Background(), tbl, tbl.CurrentSnapshot(), tablescan.Options{Columns: cols}, func(rec arrow.RecordBatch) error {
		files := rec.Column(3).(*array.String)
		for i := range int(rec.NumRows()) {
			if files.Value(i) == path {
				rows = append(rows, []any{format.ValueAt(rec.Column(0), i), format.ValueAt(rec.Column(1), i), format.ValueAt(rec.Column(2), i)})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func deleteWhere(t *testing.T, tbl *table.Table, filter iceberg.BooleanExpression) *table.Table {
	t.Helper()
	tx := tbl.NewTransaction()
	if err := tx.Delete(context.Background(), filter, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	out, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit delete: %v", err)
	}
	return out
}

func overwriteWhere(t *testing.T, tbl *table.Table, filter iceberg.BooleanExpression, rows ...[]any) *table.Table {
	t.Helper()
	rec := testtables.Record(t, tbl.Schema(), rows...)
	defer rec.Release()
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	tx := tbl.NewTransaction()
	if err := tx.Overwrite(context.Background(), rdr, nil, table.WithOverwriteFilter(filter)); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	out, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit overwrite: %v", err)
	}
	return out
}

func rowsRange(from, to int64, cat string) [][]any {
	var rows [][]any
	for id := from; id < to; id++ {
		rows = append(rows, row(id, fmt.Sprintf("n%02d", id%7), cat))
	}
	return rows
}

// TestDeltaCommitKinds walks one table through every kind of commit and
// checks each delta, and for some the files it had to read.
func TestDeltaCommitKinds(t *testing.T) {
	indexes := testIndexes(t)
	tbl := newTable(t, "kinds", 2)
	tbl, filesA := testtables.Append(t, tbl, rowsRange(0, 10, "a")...)
	st := checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.DataFilesAdded != 1 || s.Inserts != 10 || s.Deletes != 0 {
		t.Errorf("first snapshot: %+v, want 1 file and 10 inserts", s)
	}
	tbl, filesB := testtables.Append(t, tbl, rowsRange(10, 20, "b")...)
	st = checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.DataFilesAdded != 1 || s.FilesScanned != 1 || s.Inserts != 10 {
		t.Errorf("append: %+v, want one file read and 10 inserts", s)
	}
	a, b := filesA[0], filesB[0]

	t.Run("position deletes", func(t *testing.T) {
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: a, Pos: []int64{1, 2}})
		st := checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.DeleteFilesAdded != 1 || s.FilesScanned != 1 || s.Deletes != 2 || s.Inserts != 0 {
			t.Errorf("%+v, want one file read and 2 deletes", s)
		}
		// A delete file for two data files names no single file.
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: a, Pos: []int64{2, 3}}, testtables.Positions{File: b, Pos: []int64{0}})
		st = checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.FilesScanned != 2 || s.Deletes != 2 {
			t.Errorf("shared delete file: %+v, want 2 files read and 2 deletes (position 2 was already deleted)", s)
		}
	})
	t.Run("equality deletes at several sequence numbers", func(t *testing.T) {
		tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldID}, []any{int64(5)})
		st := checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.EqualityDeleteSlowPath != 2 || s.Deletes != 1 {
			t.Errorf("%+v, want both files read in full and 1 delete", s)
		}
		tbl, _ = testtables.Append(t, tbl, row(5, "again", "a"))
		checkLast(t, tbl, indexes, DeltaOptions{})
		// The same delete again removes the re-inserted row, whose file is older now.
		tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldID}, []any{int64(5)})
		st = checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.Deletes != 1 {
			t.Errorf("second delete of id 5: %+v, want 1 delete", s)
		}
		// A delete by name, null included.
		tbl, _ = testtables.Append(t, tbl, row(40, nil, "a"), row(41, "x", "a"))
		checkLast(t, tbl, indexes, DeltaOptions{})
		tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldName}, []any{nil}, []any{"n03"})
		checkLast(t, tbl, indexes, DeltaOptions{})
	})
	t.Run("upsert", func(t *testing.T) {
		del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, []any{int64(11)}, []any{int64(12)})
		tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(11, "u11", "b"), row(12, "u12", "b"))
		st := checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.Deletes != 2 || s.Inserts != 2 {
			t.Errorf("%+v, want 2 deletes and 2 inserts", s)
		}
	})
	t.Run("rewrite", func(t *testing.T) {
		live := liveRowsOf(t, tbl, a.FilePath())
		tbl, _ = testtables.Rewrite(t, tbl, []iceberg.DataFile{a}, live...)
		if op := tbl.CurrentSnapshot().Summary.Operation; op != table.OpReplace {
			t.Fatalf("rewrite made a %q snapshot", op)
		}
		st := checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.DataFilesRemoved != 1 || s.DataFilesAdded != 1 || s.Deletes != int64(len(live)) || s.Inserts != int64(len(live)) {
			t.Errorf("%+v, want the %d live rows to move", s, len(live))
		}
	})
	t.Run("delete whole file", func(t *testing.T) {
		tbl = deleteWhere(t, tbl, iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(10)))
		st := checkLast(t, tbl, indexes, DeltaOptions{})
		if s := st["location"]; s.DataFilesRemoved == 0 || s.Inserts != 0 {
			t.Errorf("%+v, want files removed and no inserts", s)
		}
	})
	t.Run("overwrite", func(t *testing.T) {
		tbl = overwriteWhere(t, tbl, iceberg.LessThan(iceberg.Reference("id"), int64(4)), row(0, "new0", "a"), row(100, "new100", "c"))
		checkLast(t, tbl, indexes, DeltaOptions{})
	})
}

// TestDeltaDeletionVectors checks that a deletion vector that replaces an
// older one counts only the positions it adds.
func TestDeltaDeletionVectors(t *testing.T) {
	indexes := testIndexes(t)
	tbl := newTable(t, "dvs", 3)
	tbl, files := testtables.Append(t, tbl, rowsRange(0, 20, "a")...)
	tbl, others := testtables.Append(t, tbl, rowsRange(20, 30, "b")...)
	checkLast(t, tbl, indexes, DeltaOptions{})
	tbl, _ = testtables.AddDV(t, tbl, files[0], 1, 2, 3)
	st := checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.FilesScanned != 1 || s.Deletes != 3 {
		t.Errorf("first vector: %+v, want one file read and 3 deletes", s)
	}
	tbl, _ = testtables.AddDV(t, tbl, files[0], 7, 15)
	st = checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.DeleteFilesAdded != 1 || s.DeleteFilesRemoved != 1 || s.FilesScanned != 1 || s.Deletes != 2 || s.Inserts != 0 {
		t.Errorf("replacing vector: %+v, want one file read and exactly the 2 new deletes", s)
	}
	tbl, _ = testtables.AddDV(t, tbl, others[0], 0)
	checkLast(t, tbl, indexes, DeltaOptions{})
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldID}, []any{int64(4)}, []any{int64(21)})
	checkLast(t, tbl, indexes, DeltaOptions{})
	// A delta across several snapshots, as when the updater skips ahead.
	first := tbl.SnapshotByID(*tbl.SnapshotByID(*tbl.CurrentSnapshot().ParentSnapshotID).ParentSnapshotID)
	checkDelta(t, tbl, first, tbl.CurrentSnapshot(), indexes, DeltaOptions{})
}

// TestDeltaPartitionedEqualityDeletes checks that a partitioned equality
// delete reads and affects only its partition, and a delete of an
// unpartitioned spec every partition.
func TestDeltaPartitionedEqualityDeletes(t *testing.T) {
	indexes := testIndexes(t)
	tbl := newTable(t, "parts", 2)
	tbl = testtables.UpdateSpec(t, tbl, func(u *table.UpdateSpec) { u.AddIdentity("cat") })
	rows := append(rowsRange(0, 10, "a"), rowsRange(0, 10, "b")...)
	tbl, files := testtables.Append(t, tbl, rows...)
	if len(files) != 2 {
		t.Fatalf("append made %d files, want one per partition", len(files))
	}
	checkLast(t, tbl, indexes, DeltaOptions{})
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{fieldID, fieldCat}, []any{int64(1), "a"})
	st := checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.EqualityDeleteSlowPath != 1 || s.Deletes != 1 {
		t.Errorf("partition delete: %+v, want one file read and 1 delete", s)
	}
	global := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, []any{int64(2)})
	tbl = testtables.CommitDeletes(t, tbl, global)
	st = checkLast(t, tbl, indexes, DeltaOptions{})
	if s := st["location"]; s.EqualityDeleteSlowPath != 2 || s.Deletes != 2 {
		t.Errorf("unpartitioned delete: %+v, want both files read and 2 deletes", s)
	}
}

// scanResolver is an EqualityResolver computed by scanning the old
// snapshot: the exact candidates an index lookup would return.
type scanResolver struct {
	t     *testing.T
	tbl   *table.Table
	old   *table.Snapshot
	calls int
	off   bool
}

func (r *scanResolver) ResolveEquality(ctx context.Context, fieldIDs []int, tuples []format.Key) (map[string][]int64, bool, error) {
	r.calls++
	if r.off {
		return nil, false, nil
	}
	types := make([]iceberg.Type, len(fieldIDs))
	for i, id := range fieldIDs {
		f, _ := r.tbl.Schema().FindFieldByID(id)
		types[i] = f.Type
	}
	cols := append(slices.Clone(fieldIDs), format.FieldIDFile, format.FieldIDPos)
	out := map[string][]int64{}
	_, err := tablescan.Scan(ctx, r.tbl, r.old, tablescan.Options{Columns: cols}, func(rec arrow.RecordBatch) error {
		n := len(fieldIDs)
		for i := range int(rec.NumRows()) {
			vals := make(format.Key, n)
			for j := range n {
				vals[j] = format.ValueAtAs(types[j], rec.Column(j), i)
			}
			for _, tup := range tuples {
				if format.CompareKeys(types, vals, tup) == 0 {
					path := rec.Column(n).(*array.String).Value(i)
					out[path] = append(out[path], rec.Column(n+1).(*array.Int64).Value(i))
					break
				}
			}
		}
		return nil
	})
	return out, true, err
}

// upsertedTable is a table of ids 0-39 in four data files of ten, then one
// upsert commit of ids 3 and 25 (its equality delete also names 999, which
// no row holds); old is the snapshot before the upsert.
func upsertedTable(t *testing.T, name string) (tbl *table.Table, old *table.Snapshot) {
	t.Helper()
	tbl = newTable(t, name, 2)
	for i := range int64(4) {
		tbl, _ = testtables.Append(t, tbl, rowsRange(i*10, i*10+10, "a")...)
	}
	old = tbl.CurrentSnapshot()
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, []any{int64(3)}, []any{int64(25)}, []any{int64(999)})
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(3, "u3", "a"), row(25, "u25", "a"))
	return tbl, old
}

func TestDeltaEqualityResolver(t *testing.T) {
	indexes := testIndexes(t)
	tbl, old := upsertedTable(t, "resolver")
	snap := tbl.CurrentSnapshot()

	slow := checkDelta(t, tbl, old, snap, indexes, DeltaOptions{})["location"]
	r := &scanResolver{t: t, tbl: tbl, old: old}
	fast := checkDelta(t, tbl, old, snap, indexes, DeltaOptions{Equality: r})["location"]
	if r.calls != len(indexes) {
		t.Errorf("resolver called %d times, want once per index", r.calls)
	}
	if slow.EqualityDeleteSlowPath != 4 || fast.EqualityDeleteSlowPath != 0 {
		t.Errorf("slow path counts: %d without a resolver (want 4), %d with one (want 0)", slow.EqualityDeleteSlowPath, fast.EqualityDeleteSlowPath)
	}
	// The new file and the two files holding ids 3 and 25.
	if fast.FilesScanned != 3 || slow.FilesScanned != 5 {
		t.Errorf("files read: %d with a resolver (want 3), %d without (want 5)", fast.FilesScanned, slow.FilesScanned)
	}
	off := &scanResolver{t: t, tbl: tbl, old: old, off: true}
	if s := checkDelta(t, tbl, old, snap, indexes, DeltaOptions{Equality: off})["location"]; s.EqualityDeleteSlowPath != 4 {
		t.Errorf("a resolver that cannot answer: slow path %d, want 4", s.EqualityDeleteSlowPath)
	}
}

// TestDeltaResolvesSkippedCommitsInOneCall checks the delta over several
// upsert commits at once (an updater under policy latest): one resolver
// call per index answers the equality delete files of every commit, and
// the delta is still exact, including a key upserted twice and a delete of
// a key whose row came in a skipped commit.
func TestDeltaResolvesSkippedCommitsInOneCall(t *testing.T) {
	indexes := testIndexes(t)
	tbl := newTable(t, "skipped", 2)
	for i := range int64(4) {
		tbl, _ = testtables.Append(t, tbl, rowsRange(i*10, i*10+10, "a")...)
	}
	old := tbl.CurrentSnapshot()
	upserts := [][]int64{{3, 25}, {25, 38}, {7, 25}}
	for n, ids := range upserts {
		var keys [][]any
		var rows [][]any
		for _, id := range ids {
			keys = append(keys, []any{id})
			rows = append(rows, row(id, fmt.Sprintf("v%d", n), "a"))
		}
		del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, keys...)
		tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, rows...)
	}
	r := &scanResolver{t: t, tbl: tbl, old: old}
	st := checkDelta(t, tbl, old, tbl.CurrentSnapshot(), indexes, DeltaOptions{Equality: r})
	if r.calls != len(indexes) {
		t.Errorf("resolver called %d times for %d indexes over %d commits, want once per index", r.calls, len(indexes), len(upserts))
	}
	s := st["location"]
	if s.EqualityResolves != 1 || s.DeleteFilesAdded != len(upserts) || s.EqualityDeleteSlowPath != 0 {
		t.Errorf("location index: %+v, want 1 resolve of %d delete files and no slow path", s, len(upserts))
	}
	// Ids 3, 7, 25 and 38 lose their first row, and their newest versions
	// (25 of the last commit) come in.
	if s.Deletes != 4 || s.Inserts != 4 {
		t.Errorf("location index: %d deletes and %d inserts, want 4 and 4", s.Deletes, s.Inserts)
	}
}

// entryResolver answers with the entries of an index, computed by scanning
// the old snapshot; extra names one more key whose rows it returns as well,
// as a resolver may (rows that no added delete removes).
type entryResolver struct {
	scanResolver
	is      *format.IndexSchema
	extra   int64
	entries int
}

func (r *entryResolver) ResolveEqualityEntries(ctx context.Context, fieldIDs []int, tuples []format.Key) ([]format.Key, bool, error) {
	r.calls++
	if len(fieldIDs) != 1 || fieldIDs[0] != fieldID {
		return nil, false, nil
	}
	want := map[int64]bool{r.extra: true}
	for _, tup := range tuples {
		want[tup[0].(int64)] = true
	}
	columns, err := tablescan.TopLevelColumns(r.tbl.Schema(), r.is.SourceFieldIDs())
	if err != nil {
		return nil, false, err
	}
	codec := format.NewEntryCodec(r.is)
	var out []format.Key
	_, err = tablescan.Scan(ctx, r.tbl, r.old, tablescan.Options{Columns: columns}, func(src arrow.RecordBatch) error {
		entries, err := format.Entries(memory.DefaultAllocator, r.is, format.RecordColumns(src, r.tbl.Schema()))
		if err != nil {
			return err
		}
		defer entries.Release()
		for i := range int(entries.NumRows()) {
			e := codec.Row(nil, entries, i)
			if id, ok := e[0].(int64); ok && want[id] {
				out = append(out, e)
			}
		}
		return nil
	})
	r.entries += len(out)
	return out, true, err
}

// TestDeltaDeletesFromIndexEntries: with a resolver that answers with index
// entries, an upsert commit's deletes come from those entries: no data file
// of the old snapshot is read (only the commit's new one), and the delta is
// exact, though the resolver also named the rows of a key no delete
// removes.
func TestDeltaDeletesFromIndexEntries(t *testing.T) {
	indexes := testIndexes(t)[:1] // location: every field stored
	tbl, old := upsertedTable(t, "entries")
	r := &entryResolver{scanResolver: scanResolver{t: t, tbl: tbl, old: old}, is: indexes[0].is, extra: 17}
	s := checkDelta(t, tbl, old, tbl.CurrentSnapshot(), indexes, DeltaOptions{Equality: r})["location"]
	if r.entries != 3 {
		t.Errorf("resolver returned %d entries, want 3 (ids 3, 17 and 25)", r.entries)
	}
	if s.FilesScanned != 1 || s.EqualityFromIndex != 3 || s.Deletes != 2 || s.Inserts != 2 {
		t.Errorf("stats %+v: want only the new data file read, three files' deletes (ids 3, 17, 25) from the index, 2 deletes and 2 inserts", s)
	}
}

// manifestOpens counts the manifest files (not manifest lists) opened
// through an IO.
type manifestOpens struct {
	iceio.IO
	opens atomic.Int64
}

func (m *manifestOpens) Open(name string) (iceio.File, error) {
	if base := path.Base(name); strings.HasSuffix(base, ".avro") && !strings.HasPrefix(base, "snap-") {
		m.opens.Add(1)
	}
	return m.IO.Open(name)
}

// TestDeltaReadsOnlyNewManifests: every snapshot of an upserted table
// lists all its manifests again; the delta of each commit opens only the
// ones that commit added, so its cost does not grow with the table's
// history.
func TestDeltaReadsOnlyNewManifests(t *testing.T) {
	ctx := context.Background()
	indexes := testIndexes(t)
	tbl := newTable(t, "manifests", 2)
	for i := range int64(4) {
		tbl, _ = testtables.Append(t, tbl, rowsRange(i*10, i*10+10, "a")...)
	}
	var snaps []*table.Snapshot
	for i := range int64(4) {
		del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{fieldID}, []any{i * 7})
		tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(i*7, fmt.Sprintf("u%d", i), "a"))
		snaps = append(snaps, tbl.CurrentSnapshot())
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counting := &manifestOpens{IO: fs}
	counted := table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(),
		func(context.Context) (iceio.IO, error) { return counting, nil }, nil)
	for i := 1; i < len(snaps); i++ {
		before := counting.opens.Load()
		// Exactness is checkDelta's (the other tests): here only what
		// the delta itself opens counts.
		_, err := ComputeDelta(ctx, counted, snaps[i-1], snaps[i], indexes[0].is, DeltaOptions{},
			func(format.Key, int) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		listed, err := snaps[i].Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		// The first delta reads the table's manifests once; each later one
		// only the data and delete manifest its commit added.
		if n := counting.opens.Load() - before; i > 1 && n > 2 {
			t.Errorf("delta %d: %d manifests opened of the %d the snapshot lists, want only the 2 its commit added", i, n, len(listed))
		}
	}
}
