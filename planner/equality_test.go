package planner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// locations prints positions by data file, sorted, for comparisons.
func locations(byFile map[string][]int64) string {
	var out []string
	for _, f := range slices.Sorted(maps.Keys(byFile)) {
		pos := slices.Clone(byFile[f])
		slices.Sort(pos)
		if len(pos) > 0 {
			out = append(out, fmt.Sprintf("%s%v", f, pos))
		}
	}
	return strings.Join(out, "\n")
}

// The equality resolver of the table delta and the live positions of
// rewrite-deletes, against a scan: keys whose runs span many tiny range
// files, null keys (null equals null), absent keys, and field lists in
// any order.
func TestSnapshotReaderResolvesThroughTheIndex(t *testing.T) {
	ctx := context.Background()
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, files := testtables.Append(t, tbl, testtables.OrderRows(0, 150, 0)...)
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(150, 300, 0)...)
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: files[0], Pos: []int64{3, 10, 17}})
	snap := tbl.CurrentSnapshot()
	is, tr := builtIndex(t, tbl, snap, `{"name":"by_cust","identity":["customer_id","id"],"materialized":["_file","_pos"],"cluster":["customer_id","id"]}`)
	if len(tr.Entries) < 5 {
		t.Fatalf("want many range files, got %d", len(tr.Entries))
	}
	r := NewSnapshotReader(nil, is, tr.Entries)
	rows := scanTable(t, tbl, snap)

	want := func(keep func(row) bool) string {
		out := map[string][]int64{}
		for _, rw := range rows {
			if keep(rw) {
				f := rw["_file"].(string)
				out[f] = append(out[f], rw["_pos"].(int64))
			}
		}
		return locations(out)
	}
	for _, tc := range []struct {
		name   string
		ids    []int
		tuples []format.Key
		keep   func(row) bool
	}{
		{"customer 3 and null", []int{2}, []format.Key{{int64(3)}, {nil}, {int64(99)}},
			func(rw row) bool { return rw["customer_id"] == nil || rw["customer_id"] == int64(3) }},
		{"every customer", []int{2}, []format.Key{{int64(0)}, {int64(1)}, {int64(2)}, {int64(3)}, {int64(4)}, {int64(5)}, {int64(6)}},
			func(rw row) bool { return rw["customer_id"] != nil }},
		{"id then customer", []int{1, 2}, []format.Key{{int64(5), int64(5)}, {int64(22), nil}, {int64(17), int64(3)}, {int64(6), int64(0)}},
			func(rw row) bool {
				id := rw["id"].(int64)
				return id == 5 || id == 22 || id == 17 // (6, 0) does not exist: order 6 has customer 6
			}},
	} {
		got, ok, err := r.ResolveEquality(ctx, tc.ids, tc.tuples)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v, %v", tc.name, ok, err)
		}
		if w, g := want(tc.keep), locations(got); w != g {
			t.Errorf("%s: resolved\n%s\nwant\n%s", tc.name, g, w)
		}
	}
	if _, ok, _ := r.ResolveEquality(ctx, []int{1}, []format.Key{{int64(1)}}); ok {
		t.Error("resolved id through an index whose leading cluster field is customer_id")
	}

	if b := r.KeyBoundsOf(files[0]); b != nil {
		t.Errorf("key bounds %v of a data file through an index led by customer_id, which has nulls", b)
	}
	wanted := map[string]*KeyBounds{files[0].FilePath(): nil, "file:///not-a-file.parquet": nil}
	live, err := r.LivePositions(ctx, wanted)
	if err != nil {
		t.Fatal(err)
	}
	exp := roaring64.New()
	for _, rw := range rows {
		if rw["_file"] == files[0].FilePath() {
			exp.Add(uint64(rw["_pos"].(int64)))
		}
	}
	if !live[files[0].FilePath()].Equals(exp) || live[files[0].FilePath()].GetCardinality() != 147 || !live["file:///not-a-file.parquet"].IsEmpty() {
		t.Errorf("live positions: %d of the first file (want 147), %d of an unknown file",
			live[files[0].FilePath()].GetCardinality(), live["file:///not-a-file.parquet"].GetCardinality())
	}
}

// The key bounds of the data files asked for narrow what LivePositions
// reads to the range files and row groups that may hold their rows, and
// the positions stay those a scan finds.
func TestLivePositionsReadsWithinKeyBounds(t *testing.T) {
	ctx := context.Background()
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, first := testtables.Append(t, tbl, testtables.OrderRows(0, 150, 0)...)
	tbl, second := testtables.Append(t, tbl, testtables.OrderRows(150, 300, 0)...)
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: second[0], Pos: []int64{0, 7, 149}})
	snap := tbl.CurrentSnapshot()
	is, tr := builtIndex(t, tbl, snap, `{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`)
	want := map[string]*roaring64.Bitmap{first[0].FilePath(): roaring64.New(), second[0].FilePath(): roaring64.New()}
	for _, rw := range scanTable(t, tbl, snap) {
		if bm := want[rw["_file"].(string)]; bm != nil {
			bm.Add(uint64(rw["_pos"].(int64)))
		}
	}
	for _, tc := range []struct {
		name   string
		files  []iceberg.DataFile
		bounds bool
	}{
		{"the second file, unbounded", second, false},
		{"the second file, bounded", second, true},
		{"both files, bounded", []iceberg.DataFile{first[0], second[0]}, true},
	} {
		r := NewSnapshotReader(nil, is, tr.Entries)
		wanted := map[string]*KeyBounds{}
		for _, df := range tc.files {
			wanted[df.FilePath()] = nil
			if tc.bounds {
				b := r.KeyBoundsOf(df)
				if b == nil {
					t.Fatalf("%s: no key bounds for %s", tc.name, df.FilePath())
				}
				wanted[df.FilePath()] = b
			}
		}
		live, err := r.LivePositions(ctx, wanted)
		if err != nil {
			t.Fatal(err)
		}
		for _, df := range tc.files {
			if got := live[df.FilePath()]; !got.Equals(want[df.FilePath()]) {
				t.Errorf("%s: %d live positions of %s, a scan finds %d", tc.name, got.GetCardinality(), df.FilePath(), want[df.FilePath()].GetCardinality())
			}
		}
		t.Logf("%s: %d of the index's rows read", tc.name, r.RowsRead())
		switch {
		case tc.bounds && len(tc.files) == 1 && r.RowsRead() > 200:
			t.Errorf("%s: read %d entries for a file of 150 rows among 297", tc.name, r.RowsRead())
		case !(tc.bounds && len(tc.files) == 1) && r.RowsRead() != 297:
			t.Errorf("%s: read %d entries; want all 297", tc.name, r.RowsRead())
		}
	}
}

// builtIndex builds the index a friendly definition describes on snap, in
// the small test layout, and returns its schema and tracking file.
func builtIndex(t *testing.T, tbl *table.Table, snap *table.Snapshot, definition string) (*format.IndexSchema, *objstore.Tracking) {
	t.Helper()
	def, err := indexdef.Parse([]byte(definition))
	if err != nil {
		t.Fatal(err)
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), strings.TrimRight(tbl.Location(), "/")+"/indexes/"+def.Name)
	if err != nil {
		t.Fatal(err)
	}
	isnap := buildIndex(t, tbl, md, snap, buildSmall)
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, snap))
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := objstore.Local().ReadTracking(context.Background(), md, isnap, is)
	if err != nil {
		t.Fatal(err)
	}
	return is, tr
}
