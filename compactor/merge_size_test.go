package compactor

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamidx/streamidx/format"
)

// TestMergeKeepsFilesNearTarget grows an index by many commits (appends at
// the key tail, inserts and upserts around a few spots) and shrinks it by
// deletes (runs of keys and scattered ones). After every commit the index
// holds exactly the model's entries, in cluster order, and every range file
// but the last is between half and one and a half targets; the last may be
// smaller, never larger. The target is a size in bytes, then a number of
// entries (with a size no file reaches).
func TestMergeKeepsFilesNearTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		rw   RangeWriterOptions
		// measure is what a file counts for against target.
		target  int64
		measure func(format.TrackingEntry) int64
	}{
		{"bytes", RangeWriterOptions{TargetFileSize: 8 << 10, TargetFileEntries: 1 << 30}, 8 << 10,
			func(e format.TrackingEntry) int64 { return e.FileSizeInBytes }},
		{"entries", RangeWriterOptions{TargetFileSize: 1 << 30, TargetFileEntries: 300}, 300,
			func(e format.TrackingEntry) int64 { return e.RecordCount }},
	} {
		t.Run(tc.name, func(t *testing.T) { testMergeKeepsFilesNear(t, tc.rw, tc.target, tc.measure) })
	}
}

func testMergeKeepsFilesNear(t *testing.T, rw RangeWriterOptions, target int64, measure func(format.TrackingEntry) int64) {
	x := newMergeFixture(t, testIndexSchema(t))
	rw.RowGroupRows, rw.BatchRows, rw.PageSizeBytes = 256, 64, 2048
	x.opts = MergeOptions{RangeWriterOptions: rw, ReadBatchRows: 300}
	r := rand.New(rand.NewPCG(3, 4))
	payload := func() string { return fmt.Sprintf("%016x", r.Uint64()) }
	live := map[int64]string{}
	var next int64 // keys below are taken or were
	var prev []format.TrackingEntry
	keys := func() []int64 {
		ks := make([]int64, 0, len(live))
		for k := range live {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	commit := func(step int, muts []mut) {
		t.Helper()
		res, err := x.merge(prev, muts...)
		if err != nil {
			t.Fatalf("commit %d: %v", step, err)
		}
		var want []format.Key
		for _, k := range keys() {
			want = append(want, row(k, live[k]))
		}
		if got := x.check(res.Entries); !slices.Equal(got, x.storedRows(want)) {
			t.Fatalf("commit %d: the index holds %d entries, the model %d", step, len(got), len(want))
		}
		for i, e := range res.Entries {
			last := i == len(res.Entries)-1
			if m := measure(e); m > target*3/2 || !last && m < target/2 {
				t.Fatalf("commit %d: range file %d of %d is %d bytes (%d entries), outside [%d, %d]",
					step, i, len(res.Entries), e.FileSizeInBytes, e.RecordCount, target/2, target*3/2)
			}
		}
		prev = res.Entries
	}
	insert := func(muts []mut, k int64) []mut {
		p := payload()
		live[k] = p
		return append(muts, mut{row(k, p), 1})
	}
	remove := func(muts []mut, k int64) []mut {
		p := live[k]
		delete(live, k)
		return append(muts, mut{row(k, p), -1})
	}

	// Grow: keys are spaced by 10 so that later inserts find room.
	for step := range 40 {
		var muts []mut
		for range 200 {
			muts = insert(muts, next)
			next += 10
		}
		ks := keys()
		for range 2 {
			spot := ks[r.IntN(len(ks))]
			for d := range int64(40) {
				k := spot + d*10 + 5
				if _, taken := live[k]; !taken && k < next {
					muts = insert(muts, k)
				}
			}
		}
		for range 20 { // upserts: a new payload for an existing key
			k := ks[r.IntN(len(ks))]
			if slices.ContainsFunc(muts, func(m mut) bool { return m.entry[0] == k }) {
				continue
			}
			muts = remove(muts, k)
			muts = insert(muts, k)
		}
		commit(step, muts)
	}
	grown := len(prev)
	// Shrink to a tenth.
	for step := 40; len(live) > 1200; step++ {
		var muts []mut
		ks := keys()
		start := r.IntN(len(ks) - 700)
		for _, k := range ks[start : start+700] {
			muts = remove(muts, k)
		}
		for range 20 {
			k := ks[r.IntN(len(ks))]
			if _, ok := live[k]; ok {
				muts = remove(muts, k)
			}
		}
		commit(step, muts)
	}
	if grown < 10 || len(prev) > grown/3 {
		t.Errorf("the index grew to %d range files and shrank to %d: want many, then few", grown, len(prev))
	}
	t.Logf("grew to %d range files, shrank to %d", grown, len(prev))
}
