package updater

import (
	"context"
	"slices"
	"testing"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/planner"
)

// TestResolverReadsOnlyTheRowGroupsOfItsKeys: equality deletes of two keys,
// resolved through a pk index whose one range file has many row groups,
// find the rows of both keys and read only the two row groups that the
// statistics of the key column say can hold them; with one row group of
// small pages, only the pages that the page index says can hold them.
func TestResolverReadsOnlyTheRowGroupsOfItsKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		rw   compactor.RangeWriterOptions
		// groups and rows are the most row groups and entries read.
		groups, rows int64
	}{
		{"row groups", compactor.RangeWriterOptions{TargetFileSize: 1 << 30, RowGroupRows: 16}, 2, 32},
		{"pages", compactor.RangeWriterOptions{TargetFileSize: 1 << 30, PageSizeBytes: 64, BatchRows: 7}, 1, 32},
	} {
		t.Run(tc.name, func(t *testing.T) { testResolverReadsOnly(t, tc.rw, tc.groups, tc.rows) })
	}
}

func testResolverReadsOnly(t *testing.T, rw compactor.RangeWriterOptions, groups, maxRows int64) {
	e := newEnv(t, 2)
	var rows [][]any
	for i := range int64(200) {
		rows = append(rows, row(i, 0))
	}
	tbl, files := testtables.Append(t, e.tbl, rows...)
	u := New(e.cat, e.indexes, e.store, e.tbl.Identifier(), "pk", Options{Range: rw})
	ctx := context.Background()
	if _, err := align(ctx, u, nil); err != nil {
		t.Fatal(err)
	}
	md, _, err := e.indexes.Load(ctx, tbl.Identifier(), "pk")
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, tbl.CurrentSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	tf, _, err := objstore.Local().ReadTracking(ctx, md, md.CurrentSnapshot(), is)
	if err != nil {
		t.Fatal(err)
	}
	if len(tf.Entries) != 1 {
		t.Fatalf("want one range file, got %d", len(tf.Entries))
	}
	r := planner.NewSnapshotReader(objstore.Local(), is, tf.Entries)
	got, ok, err := r.ResolveEquality(ctx, []int{1}, []format.Key{{int64(5)}, {int64(150)}})
	if err != nil || !ok {
		t.Fatalf("resolve: %v (answered %v)", err, ok)
	}
	// One data file holds order i at position i.
	if want := []int64{5, 150}; len(got) != 1 || !slices.Equal(sorted(got[files[0].FilePath()]), want) {
		t.Errorf("resolved %v, want positions %v of %s", got, want, files[0].FilePath())
	}
	if n := r.RowGroupsRead(); n != groups {
		t.Errorf("read %d row groups for two keys, want %d", n, groups)
	}
	if n := r.RowsRead(); n > maxRows {
		t.Errorf("decoded the keys of %d entries of 200 for two keys, want at most %d", n, maxRows)
	}
}

func sorted(s []int64) []int64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
