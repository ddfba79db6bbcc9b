package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/planner/reconcile"
	"github.com/streamidx/streamidx/planner/source"
)

// staleHistory commits, after the two appends an index is built for,
// position deletes (or a deletion vector), equality deletes on a stored
// and on a non-stored column, an upsert, a rewrite and an append. It
// returns the table and its snapshot ids in commit order.
func staleHistory(t *testing.T, fv int) (*table.Table, []int64) {
	cat, _ := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: fv, RowGroupRows: 16})
	var snaps []int64
	note := func() { snaps = append(snaps, tbl.CurrentSnapshot().SnapshotID) }
	tbl, f1 := testtables.Append(t, tbl, testtables.OrderRows(0, 150, 0)...)
	note()
	tbl, f2 := testtables.Append(t, tbl, testtables.OrderRows(150, 300, 0)...)
	note() // [1]: the index snapshot
	if fv >= 3 {
		tbl, _ = testtables.AddDV(t, tbl, f1[0], 3, 5, 8, 40, 42)
	} else {
		tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: f1[0], Pos: []int64{3, 5, 8, 40, 42}})
	}
	note()
	del := testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(10)}, []any{int64(170)}, []any{int64(12)})
	tbl, _ = testtables.AppendAndDelete(t, tbl, []iceberg.DataFile{del}, testtables.OrderRow(12, 1))
	note()
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{2}, []any{int64(3)})
	note()
	tbl, _ = testtables.Rewrite(t, tbl, f2, testtables.OrderRows(150, 290, 3)...)
	note()
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(300, 330, 5)...)
	note()
	return tbl, snaps
}

func TestStaleIndexIsExact(t *testing.T) {
	ctx := context.Background()
	for _, fv := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", fv), func(t *testing.T) {
			tbl, snaps := staleHistory(t, fv)
			built := tbl.SnapshotByID(snaps[1])
			for _, pc := range plannerCases() {
				p := pc.p
				for _, name := range []string{"pk", "by_customer", "by_day"} {
					md := newIndex(t, tbl, name)
					buildIndex(t, tbl, md, built, buildSmall)
					for _, at := range []int{3, len(snaps) - 1} {
						target := tbl.SnapshotByID(snaps[at])
						rows := scanTable(t, tbl, target)
						var dropped, added int64
						for _, tc := range casesByIndex[name] {
							t.Run(fmt.Sprintf("%s/%s/at%d/%s", pc.name, name, at, tc.where), func(t *testing.T) {
								for range pc.times {
									res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: tc.where, TableSnapshotID: target.SnapshotID})
									if err != nil {
										t.Fatalf("lookup: %v", err)
									}
									got, want := resultRows(res), expectedRows(res.Fields, rows, tc.want)
									if !slices.Equal(got, want) {
										t.Errorf("%d rows, want %d:%s", len(got), len(want), diffRows(got, want))
									}
									if res.Plan.CommitsBehind != at-1 || res.Plan.SourceSnapshotID != built.SnapshotID {
										t.Errorf("plan: %d commits behind from %d", res.Plan.CommitsBehind, res.Plan.SourceSnapshotID)
									}
									checkLocations(t, res)
									dropped += res.Stats.EntriesDropped
									added += res.Stats.RowsAdded
									res.Release()
								}
							})
						}
						if dropped == 0 || (at == len(snaps)-1 && added == 0) {
							t.Errorf("%s at %d: %d entries dropped, %d rows added: the history did not exercise reconciliation", name, at, dropped, added)
						}
					}
				}
			}
		})
	}
}

func TestStaleExplainAndCounters(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 2)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[1]), buildSmall)
	res, err := New(Options{}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id IN (10, 12, 160, 310)"})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	// 10 is deleted; 12 re-inserted in a new file; 160 rewritten into a new
	// file; 310 appended.
	got := resultRows(res)
	if len(got) != 3 {
		t.Errorf("rows: %v", got)
	}
	st, plan := res.Stats, res.Plan
	if st.EntriesMatched != 3 || st.EntriesDropped != 3 || st.RowsAdded != 3 || st.DataFilesScanned != len(plan.AddedDataFiles) {
		t.Errorf("counters: %+v", st)
	}
	if plan.CommitsBehind != 5 || plan.RemovedDataFiles != 1 || len(plan.AddedDataFiles) != 3 {
		t.Errorf("plan: behind %d, removed %d, added %v", plan.CommitsBehind, plan.RemovedDataFiles, plan.AddedDataFiles)
	}
}

func TestChoosesNewestAncestorIndexSnapshot(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 2)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[0]), buildSmall)
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[3]), buildSmall)
	p := New(Options{})
	for _, tc := range []struct{ at, from int }{{2, 0}, {3, 3}, {6, 3}, {0, 0}} {
		res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id < 50", TableSnapshotID: snaps[tc.at]})
		if err != nil {
			t.Fatal(err)
		}
		res.Release()
		if res.Plan.SourceSnapshotID != snaps[tc.from] || res.Plan.CommitsBehind != tc.at-tc.from {
			t.Errorf("at snapshot %d: used the index snapshot of %d, %d behind; want %d", tc.at, res.Plan.SourceSnapshotID, res.Plan.CommitsBehind, snaps[tc.from])
		}
	}
	// A newer index snapshot that is not an ancestor is not used: an index
	// snapshot of the last table snapshot does not serve the third.
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[6]), buildSmall)
	res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id < 50", TableSnapshotID: snaps[2]})
	if err != nil {
		t.Fatal(err)
	}
	res.Release()
	if res.Plan.SourceSnapshotID != snaps[0] {
		t.Errorf("used the index snapshot of %d for table snapshot %d", res.Plan.SourceSnapshotID, snaps[2])
	}
	if _, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id < 50", TableSnapshotID: 12345}); err == nil || errors.Is(err, ErrNoIndexSnapshot) {
		t.Errorf("unknown table snapshot: %v", err)
	}
}

// TestMetadataOnlyTable: a source.Metadata table (the table's metadata
// file, no manifests) answers every lookup through an index snapshot built
// for the requested table snapshot exactly as reconcile.Table does, and
// refuses, with source.ErrMetadataOnly, a lookup through an index that
// lags the requested snapshot or of a type the planner does not implement.
func TestMetadataOnlyTable(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 3)
	built := tbl.SnapshotByID(snaps[1])
	meta := source.Metadata(lineage.View(tbl))
	p := New(Options{})
	for _, name := range []string{"pk", "by_customer", "by_day"} {
		md := newIndex(t, tbl, name)
		buildIndex(t, tbl, md, built, buildSmall)
		for _, tc := range casesByIndex[name] {
			want, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: tc.where, TableSnapshotID: built.SnapshotID})
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Lookup(ctx, meta, md, Query{Where: tc.where, TableSnapshotID: built.SnapshotID})
			if err != nil {
				t.Fatalf("%s %s: %v", name, tc.where, err)
			}
			if g, w := resultRows(got), resultRows(want); !slices.Equal(g, w) || got.Plan.CommitsBehind != 0 {
				t.Errorf("%s %s: %d rows, reconcile.Table's %d:%s", name, tc.where, len(g), len(w), diffRows(g, w))
			}
			got.Release()
			want.Release()
			if _, err := p.Lookup(ctx, meta, md, Query{Where: tc.where}); !errors.Is(err, source.ErrMetadataOnly) {
				t.Errorf("%s %s at the current snapshot, 5 commits ahead of the index: %v, want ErrMetadataOnly", name, tc.where, err)
			}
		}
	}
	vector := newIndex(t, tbl, "pk")
	vector.Type = "VECTOR"
	if _, err := p.Lookup(ctx, meta, vector, Query{Where: "id = 1", TableSnapshotID: built.SnapshotID}); !errors.Is(err, source.ErrMetadataOnly) {
		t.Errorf("a VECTOR index: %v, want ErrMetadataOnly", err)
	}
}
