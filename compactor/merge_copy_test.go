package compactor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// TestMergeCopiesUntouchedRowGroups rewrites range files of several row
// groups with a delta at the key tail and one scattered over a few spots:
// the row groups the delta does not reach are copied, not decoded, and the
// index that results holds the same entries, in the same files, with the
// same statistics as a merge that decodes every row group.
func TestMergeCopiesUntouchedRowGroups(t *testing.T) {
	is := testIndexSchema(t)
	if !format.CanCopyRowGroups(is) {
		t.Fatal("the test index cannot copy row groups")
	}
	x := newMergeFixture(t, is)
	x.opts = MergeOptions{RangeWriterOptions: RangeWriterOptions{TargetFileSize: 1 << 30, TargetFileEntries: 1000, RowGroupRows: 100,
		BatchRows: 50, PageSizeBytes: 512}, ReadBatchRows: 64, Parallelism: 1}
	base := evenRows(3000) // keys 0..5998: three files of ten row groups
	prev := x.write(1<<30, base...)
	if len(prev) != 3 {
		t.Fatalf("%d range files, want 3", len(prev))
	}
	for _, tc := range []struct {
		name       string
		muts       []mut
		copiedMin  int   // row groups copied, at the least
		rewriteMax int64 // entries decoded and encoded, at most
	}{
		{"tail", []mut{{row(5999, "new"), 1}, {row(6001, "new"), 1}, {row(5998, "payload-02999"), -1}}, 9, 200},
		// A change in each file makes one run of the three, which the
		// writer cuts evenly: the row group at each cut is decoded too.
		{"spots", []mut{{row(101, "new"), 1}, {row(2501, "new"), 1}, {row(4000, "payload-02000"), -1}}, 24, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x.opts.DecodeAllRowGroups = true
			decoded, err := x.merge(prev, tc.muts...)
			if err != nil {
				t.Fatal(err)
			}
			x.opts.DecodeAllRowGroups = false
			copied, err := x.merge(prev, tc.muts...)
			if err != nil {
				t.Fatal(err)
			}
			if decoded.RowGroupsCopied != 0 {
				t.Errorf("a merge that decodes every row group copied %d", decoded.RowGroupsCopied)
			}
			if copied.RowGroupsCopied < tc.copiedMin || copied.EntriesRewritten > tc.rewriteMax {
				t.Errorf("copied %d row groups (%d entries) and rewrote %d entries; want %d row groups at least and %d entries at most",
					copied.RowGroupsCopied, copied.EntriesCopied, copied.EntriesRewritten, tc.copiedMin, tc.rewriteMax)
			}
			want := x.storedRows(applyModel(base, tc.muts))
			if got := x.check(copied.Entries); !slices.Equal(got, want) {
				t.Fatalf("the index holds %d entries, want %d", len(got), len(want))
			}
			if len(copied.Entries) != len(decoded.Entries) {
				t.Fatalf("%d range files, %d when decoding every row group", len(copied.Entries), len(decoded.Entries))
			}
			for i, e := range copied.Entries {
				d := decoded.Entries[i]
				if e.RecordCount != d.RecordCount {
					t.Errorf("file %d: %d entries, %d when decoding", i, e.RecordCount, d.RecordCount)
				}
				for _, id := range slices.Sorted(maps.Keys(d.Stats)) {
					if got, want := statsText(e.Stats[id]), statsText(d.Stats[id]); got != want {
						t.Errorf("file %d field %d: statistics %s, %s when decoding", i, id, got, want)
					}
				}
				checkRowGroupsReadable(t, is, e)
			}
		})
	}
}

// TestMergeCopiesPastADenseChange: a change of more entries than the
// merge looks ahead of (peekLimit) in one row group makes it read on
// without copying, and still gives the model's entries; the files after it
// still copy their untouched row groups.
func TestMergeCopiesPastADenseChange(t *testing.T) {
	defer func(n int) { peekLimit = n }(peekLimit)
	peekLimit = 3
	is := testIndexSchema(t)
	x := newMergeFixture(t, is)
	x.opts = MergeOptions{RangeWriterOptions: RangeWriterOptions{TargetFileSize: 1 << 30, TargetFileEntries: 1000, RowGroupRows: 100,
		BatchRows: 50, PageSizeBytes: 512}, ReadBatchRows: 64, Parallelism: 1}
	base := evenRows(3000)
	prev := x.write(1<<30, base...)
	var muts []mut
	for i := range 10 {
		muts = append(muts, mut{row(101, fmt.Sprintf("dense-%02d", i)), 1})
	}
	muts = append(muts, mut{row(4501, "new"), 1}, mut{row(4998, "payload-02499"), -1})
	res, err := x.merge(prev, muts...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.check(res.Entries), x.storedRows(applyModel(base, muts)); !slices.Equal(got, want) {
		t.Fatalf("the index holds %d entries, want %d", len(got), len(want))
	}
	if res.RowGroupsCopied < 5 {
		t.Errorf("%d row groups copied; want those of the last file the delta does not reach", res.RowGroupsCopied)
	}
}

func statsText(s *format.FieldStats) string {
	if s == nil {
		return "none"
	}
	deref := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	tight := any(nil)
	if s.TightBounds != nil {
		tight = *s.TightBounds
	}
	return fmt.Sprintf("lower=%v upper=%v tight=%v values=%v nulls=%v nans=%v max=%v/%v", s.LowerBound, s.UpperBound, tight,
		deref(s.ValueCount), deref(s.NullValueCount), deref(s.NanValueCount), s.GroupMax, s.HasGroupMax)
}

// checkRowGroupsReadable reads the last entry of every row group through
// the offset index (a seek, which lands where the moved offsets say) and
// checks it against a read of the whole file.
func checkRowGroupsReadable(t *testing.T, is *format.IndexSchema, te format.TrackingEntry) {
	t.Helper()
	all := readRangeFile(t, is, te)
	r, err := objstore.Local().OpenRange(context.Background(), &te, is, format.RangeFileReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var before int64
	for g := range r.NumRowGroups() {
		rows, _ := r.RowGroupStats(g)
		if _, err := r.PageStats(g, 1); err != nil {
			t.Fatalf("%s row group %d: page index: %v", te.FilePath, g, err)
		}
		key, err := r.ClusterKey(context.Background(), is, g, rows-1)
		if err != nil {
			t.Fatalf("%s row group %d: %v", te.FilePath, g, err)
		}
		if want := all[before+rows-1][0]; key[0] != want {
			t.Fatalf("%s row group %d: last key %v read by seeking, %v by reading the file", te.FilePath, g, key[0], want)
		}
		before += rows
	}
}
