package updater

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
)

// TestPoliciesChooseSnapshots: an index built at S0 follows three commits
// (S1..S3), then six more (S4..S9) made while it was not looking. Every
// policy publishes exact index snapshots; which source snapshots get one is
// the policy's choice. While the index lags the six commits, lookups
// through it are exact for the table's current snapshot.
func TestPoliciesChooseSnapshots(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		// want are the positions in S0..S9 of the source snapshots that
		// get an index snapshot.
		want []int
	}{
		{"every", Options{Policy: PolicyEvery}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"latest", Options{Policy: PolicyLatest}, []int{0, 3, 9}},
		{"adaptive by snapshots", Options{Policy: PolicyAdaptive, AdaptiveMaxSnapshots: 4, AdaptiveMaxLag: time.Hour}, []int{0, 1, 2, 3, 9}},
		{"adaptive by lag", Options{Policy: PolicyAdaptive, AdaptiveMaxSnapshots: 100, AdaptiveMaxLag: time.Minute}, []int{0, 1, 2, 3, 9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, 2)
			ctx := context.Background()
			// The clock of adaptive: the second batch of commits is made
			// to look an hour old.
			var late time.Duration
			c.opts.Now = func() time.Time { return time.Now().Add(late) }
			c.opts.Range = compactor.RangeWriterOptions{TargetFileSize: 1 << 10, RowGroupRows: 16}
			u := New(e.cat, e.indexes, e.store, e.tbl.Identifier(), "pk", c.opts)
			tbl := e.tbl
			var sources []int64
			commit := func(i int) {
				if i%3 == 2 {
					del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(i - 1)})
					tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(int64(i-1), 1), row(int64(100+i), 0))
				} else {
					tbl, _ = testtables.Append(t, tbl, row(int64(i), 0), row(int64(50+i), 0))
				}
				sources = append(sources, tbl.CurrentSnapshot().SnapshotID)
			}
			commit(0)
			if _, err := align(ctx, u, nil); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				commit(i)
			}
			if _, err := align(ctx, u, nil); err != nil {
				t.Fatal(err)
			}
			e.verifyCurrent("pk", 3)
			for i := 4; i <= 9; i++ {
				commit(i)
			}
			checkLaggingLookups(t, e, tbl)
			late = time.Hour
			if _, err := align(ctx, u, nil); err != nil {
				t.Fatal(err)
			}
			e.verifyCurrent("pk", 9)
			md, _, err := e.indexes.Load(ctx, e.tbl.Identifier(), "pk")
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, s := range md.Snapshots {
				got = append(got, slices.Index(sources, s.SourceTableSnapshotID))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("index snapshots for source snapshots S%v, want S%v", got, c.want)
			}
		})
	}
}

// checkLaggingLookups looks up every key through the pk index, which lags
// the table, for the table's current snapshot and compares the rows and
// their locations with a scan of that snapshot.
func checkLaggingLookups(t *testing.T, e *env, tbl *table.Table) {
	t.Helper()
	ctx := context.Background()
	md, _, err := e.indexes.Load(ctx, tbl.Identifier(), "pk")
	if err != nil {
		t.Fatal(err)
	}
	if md.CurrentSnapshot().SourceTableSnapshotID == tbl.CurrentSnapshot().SnapshotID {
		t.Fatal("the index does not lag the table")
	}
	res, err := planner.New(planner.Options{}).Lookup(ctx, reconcile.Table(tbl), md, planner.Query{Where: "id >= 0"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	var got []string
	for _, b := range res.Batches {
		for i := range int(b.NumRows()) {
			got = append(got, fmt.Sprint(format.ValueAt(b.Column(0), i), format.ValueAt(b.Column(1), i), format.ValueAt(b.Column(2), i)))
		}
	}
	var want []string
	_, err = tablescan.Scan(ctx, tbl, tbl.CurrentSnapshot(), tablescan.Options{Columns: []int{1, format.FieldIDFile, format.FieldIDPos}},
		func(b arrow.RecordBatch) error {
			for i := range int(b.NumRows()) {
				want = append(want, fmt.Sprint(format.ValueAt(b.Column(0), i), format.ValueAt(b.Column(1), i), format.ValueAt(b.Column(2), i)))
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("a lookup through the lagging index returned %d rows, the table holds %d:\n%v\n%v", len(got), len(want), got, want)
	}
	if res.Plan.CommitsBehind == 0 {
		t.Error("the plan did not reconcile a lagging index")
	}
}

// TestStagesTheNextDeltaWhilePublishing: with two commits to index, the
// step that publishes the first stages the delta of the second under the
// name of the index snapshot it publishes; the next step uses that stage
// (and reports its mutations), and once the index moved on no stage is
// left.
func TestStagesTheNextDeltaWhilePublishing(t *testing.T) {
	e := newEnv(t, 2)
	ctx := context.Background()
	u := e.updater("pk", PolicyEvery)
	tbl, _ := testtables.Append(t, e.tbl, row(1, 0), row(2, 0), row(3, 0))
	if _, err := align(ctx, u, nil); err != nil {
		t.Fatal(err)
	}
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(2)})
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, row(2, 1))
	first := tbl.CurrentSnapshot()
	tbl, _ = testtables.Append(t, tbl, row(4, 0))
	second := tbl.CurrentSnapshot()

	st, err := u.Step(ctx, nil)
	if err != nil || st.Published == nil || st.Published.SourceSnapshotID != first.SnapshotID {
		t.Fatalf("first step: %+v, %v", st.Published, err)
	}
	md, _, _ := e.indexes.Load(ctx, e.tbl.Identifier(), "pk")
	published := md.CurrentSnapshot().SnapshotID
	sealed, err := e.store.Sealed(u.stageName(published))
	if err != nil || len(sealed) != 1 || sealed[0].SourceSnapshotID != second.SnapshotID {
		t.Fatalf("stages named after the published snapshot: %+v, %v; want the delta of the second commit", sealed, err)
	}
	st, err = u.Step(ctx, nil)
	if err != nil || st.Published == nil || st.Published.SourceSnapshotID != second.SnapshotID {
		t.Fatalf("second step: %+v, %v", st.Published, err)
	}
	if st.Published.StagedMutations != 1 {
		t.Errorf("the second step reports %d staged mutations, want the 1 staged ahead", st.Published.StagedMutations)
	}
	e.verifyCurrent("pk", 2)
	if left, err := e.store.Sealed(u.stageName(published)); err != nil || len(left) != 0 {
		t.Errorf("spent stages left behind: %+v, %v", left, err)
	}
}
