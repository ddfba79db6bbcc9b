package updater

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestRangeFilesStayNearTargetAsTheTableGrowsAndShrinks: a pk index
// follows a table that grows by appends and upserts and then shrinks by
// equality deletes. After every commit the index snapshot verifies, and
// every range file but the last is between half and one and a half targets
// (the last may be smaller).
func TestRangeFilesStayNearTargetAsTheTableGrowsAndShrinks(t *testing.T) {
	e := newEnv(t, 2)
	ctx := context.Background()
	const target = 16 << 10
	u := New(e.cat, e.indexes, e.store, e.tbl.Identifier(), "pk", Options{
		Range: compactor.RangeWriterOptions{TargetFileSize: target, RowGroupRows: 1024, BatchRows: 64}})
	r := rand.New(rand.NewPCG(5, 6))
	tbl := e.tbl
	live := map[int64]int{}
	var next int64
	most := 0
	check := func(step int) {
		t.Helper()
		if _, err := align(ctx, u, nil); err != nil {
			t.Fatalf("commit %d: %v", step, err)
		}
		e.verifyCurrent("pk", step)
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
		for i, f := range tf.Entries {
			if f.FileSizeInBytes > target*3/2 || i < len(tf.Entries)-1 && f.FileSizeInBytes < target/2 {
				t.Fatalf("commit %d: range file %d of %d is %d bytes (%d entries), outside [%d, %d]",
					step, i, len(tf.Entries), f.FileSizeInBytes, f.RecordCount, target/2, target*3/2)
			}
		}
		most = max(most, len(tf.Entries))
	}
	for step := range 12 { // grow
		var rows [][]any
		for range 800 {
			rows = append(rows, row(next, 0))
			live[next] = 0
			next++
		}
		var dels [][]any
		for id, v := range live {
			if len(dels) < 150 && r.IntN(4) == 0 {
				dels = append(dels, []any{id})
				rows = append(rows, row(id, v+1))
				live[id] = v + 1
			}
		}
		del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, dels...)
		tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, rows...)
		check(step)
	}
	grown := most
	for step := 12; len(live) > 1000; step++ { // shrink: a run of ids and scattered ones
		var dels [][]any
		from := int64(r.IntN(int(next)))
		for id := from; id < from+1500; id++ {
			if _, ok := live[id]; ok {
				dels = append(dels, []any{id})
				delete(live, id)
			}
		}
		for id := range live {
			if r.IntN(10) == 0 {
				dels = append(dels, []any{id})
				delete(live, id)
			}
		}
		tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, dels...)
		check(step)
	}
	md, _, _ := e.indexes.Load(ctx, tbl.Identifier(), "pk")
	cur := md.CurrentSnapshot()
	if grown < 3 || cur.Properties["streamidx.range-files"] == "" {
		t.Errorf("the index grew to %d range files; want several", grown)
	}
	t.Logf("grew to %d range files, shrank to %s", grown, cur.Properties["streamidx.range-files"])
}
