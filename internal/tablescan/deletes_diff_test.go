package tablescan

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestEqualityNotInIsTheDifferenceOfApplicable: for every pair of
// snapshots of a table with scoped and global equality deletes, position
// deletes, a partition spec change and data written after deletes, and
// every data file live in the newer one, the equality deletes that
// EqualityNotIn finds for the file are exactly those Applicable returns in
// one snapshot and not in the other (the delta diffs data files this way),
// and WithoutEqualityOf keeps the newer snapshot's position deletes beside
// them (a lagging index is reconciled this way).
func TestEqualityNotInIsTheDifferenceOfApplicable(t *testing.T) {
	ctx := context.Background()
	tbl := newTable(t, 2, nil)
	var snaps []*table.Snapshot
	keep := func() { snaps = append(snaps, tbl.CurrentSnapshot()) }
	tbl, a := testtables.Append(t, tbl, rc(1, "a1", "x"), rc(2, "a2", "y"), rc(3, "a3", "x"))
	keep()
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(1)})
	keep()
	tbl = testtables.UpdateSpec(t, tbl, func(u *table.UpdateSpec) { u.AddIdentity("cat") })
	spec := tbl.Spec()
	partField := spec.Field(0).FieldID
	tbl, _ = testtables.Append(t, tbl, rc(1, "x1", "x"), rc(2, "x2", "x"), rc(4, "x4", "x"))
	tbl, _ = testtables.Append(t, tbl, rc(1, "y1", "y"), rc(5, "y5", "y"))
	keep()
	tbl = testtables.CommitDeletes(t, tbl, testtables.WriteEqualityDeleteFile(t, tbl, 1, map[int]any{partField: "x"}, []int{1}, []any{int64(2)}))
	keep()
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: a[0], Pos: []int64{2}})
	keep()
	tbl = testtables.CommitDeletes(t, tbl, testtables.WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, []any{int64(5)}))
	keep()
	tbl, _ = testtables.Append(t, tbl, rc(2, "x2b", "x"), rc(6, "y6", "y"))
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1, 7}, []any{int64(6), "y"})
	keep()

	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	indexes := make([]*DeleteIndex, len(snaps))
	for i, s := range snaps {
		if indexes[i], err = PlanDeletes(ctx, tbl, s); err != nil {
			t.Fatal(err)
		}
	}
	equality := func(ix *DeleteIndex, e Entry) []string {
		var out []string
		pos := paths(ix.ApplicablePositions(e.File, e.Seq))
		for _, p := range paths(ix.Applicable(e.File, e.Seq)) {
			if !slices.Contains(pos, p) {
				out = append(out, p)
			}
		}
		return out
	}
	nonEmpty := 0
	for j := range snaps {
		manifests, err := snaps[j].Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		var entries []Entry
		for _, m := range manifests {
			if m.ManifestContent() != iceberg.ManifestContentData {
				continue
			}
			es, err := LiveEntries(ctx, fs, m)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, es...)
		}
		for i := range j {
			newOnly, oldOnly := indexes[j].EqualityNotIn(indexes[i]), indexes[i].EqualityNotIn(indexes[j])
			without := indexes[j].WithoutEqualityOf(indexes[i])
			for _, e := range entries {
				inNew, inOld := equality(indexes[j], e), equality(indexes[i], e)
				want := difference(inNew, inOld)
				if got := paths(newOnly.Applicable(e.File, e.Seq)); !slices.Equal(got, want) {
					t.Errorf("snapshots %d -> %d, %s: new only %v, want %v", i, j, e.File.FilePath(), got, want)
				}
				wantWithout := slices.Concat(paths(indexes[j].ApplicablePositions(e.File, e.Seq)), want)
				slices.Sort(wantWithout)
				if got := paths(without.Applicable(e.File, e.Seq)); !slices.Equal(got, wantWithout) {
					t.Errorf("snapshots %d -> %d, %s: without the old equality deletes %v, want %v", i, j, e.File.FilePath(), got, wantWithout)
				}
				if got, want := paths(oldOnly.Applicable(e.File, e.Seq)), difference(inOld, inNew); !slices.Equal(got, want) {
					t.Errorf("snapshots %d -> %d, %s: old only %v, want %v", i, j, e.File.FilePath(), got, want)
				}
				if len(want) > 0 {
					nonEmpty++
				}
			}
		}
	}
	if nonEmpty < 10 {
		t.Errorf("only %d (pair, file) cases with an equality delete in one snapshot only: the table does not exercise the difference", nonEmpty)
	}
}

func paths(l []DeleteFile) []string {
	out := make([]string, len(l))
	for i, d := range l {
		out[i] = d.File.FilePath()
	}
	slices.Sort(out)
	return out
}

func difference(a, b []string) []string {
	out := []string{}
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// TestManifestListIsReadOnce: the manifest list of a snapshot is read once
// per process and handed out again, and lists what iceberg-go reads.
func TestManifestListIsReadOnce(t *testing.T) {
	ctx := context.Background()
	tbl := newTable(t, 2, nil)
	tbl, _ = testtables.Append(t, tbl, rc(1, "a1", "x"), rc(2, "a2", "y"))
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(1)})
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap := tbl.CurrentSnapshot()
	first, err := ManifestList(fs, snap)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ManifestList(fs, snap)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(direct) || len(first) < 2 {
		t.Fatalf("ManifestList gave %d manifests, iceberg-go reads %d", len(first), len(direct))
	}
	for i := range direct {
		if first[i].FilePath() != direct[i].FilePath() {
			t.Errorf("manifest %d: %s, iceberg-go reads %s", i, first[i].FilePath(), direct[i].FilePath())
		}
	}
	if &first[0] != &second[0] {
		t.Error("the second call read the manifest list again")
	}
}

// TestLoadForMergesForManyRowsOnly: the equality deletes of three upsert
// commits that apply to one data file come merged into one set for a
// caller that tests every row of the file, and as they are for one that
// tests two (an update that knows which rows an upsert reached), which
// would otherwise pay for merging the table's whole history of deletes
// for each file; both answer alike.
func TestLoadForMergesForManyRowsOnly(t *testing.T) {
	ctx := context.Background()
	tbl := newTable(t, 2, nil)
	var rows [][]any
	for id := range int64(1000) {
		rows = append(rows, rc(id, "n", "x"))
	}
	tbl, files := testtables.Append(t, tbl, rows...)
	for c := range int64(3) {
		var keys [][]any
		for k := range int64(40) {
			keys = append(keys, []any{c*100 + k})
		}
		tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, keys...)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := PlanDeletes(ctx, tbl, tbl.CurrentSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	var seq int64 = 1
	all, err := ix.Load(ctx, fs, tbl.Schema(), files[0], seq, Options{})
	if err != nil {
		t.Fatal(err)
	}
	few, err := ix.LoadFor(ctx, fs, tbl.Schema(), files[0], seq, Options{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Equality) != 1 || len(few.Equality) != 3 {
		t.Fatalf("equality sets: %d for every row, %d for two rows; want 1 (merged) and 3 (as they are)", len(all.Equality), len(few.Equality))
	}
	for id := range int64(1000) {
		inAll, err := all.Equality[0].Contains(format.Key{id})
		if err != nil {
			t.Fatal(err)
		}
		inFew := false
		for _, set := range few.Equality {
			if ok, _ := set.Contains(format.Key{id}); ok {
				inFew = true
			}
		}
		if want := id%100 < 40 && id < 300; inAll != want || inFew != want {
			t.Fatalf("id %d deleted: merged %v, as they are %v, want %v", id, inAll, inFew, want)
		}
	}
}
