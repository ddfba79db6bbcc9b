package planner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/planner/reconcile"
)

// TestCachedLookupsReadOnce: through a store with a lookup cache, the second
// point lookup of a page reads nothing from the range files, and the lookups
// of a lagging index share one reconciliation; a different key in a cached
// page still answers exactly, and removing a range file drops what the cache
// kept of it.
func TestCachedLookupsReadOnce(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 3)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[1]), buildPaged)
	store := objstore.New(objstore.Options{LookupCacheBytes: 64 << 20})
	p := New(Options{Store: store})
	rows := scanTable(t, tbl, tbl.CurrentSnapshot())
	lookup := func(where string) *Result {
		t.Helper()
		res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where})
		if err != nil {
			t.Fatalf("lookup %s: %v", where, err)
		}
		t.Cleanup(res.Release)
		return res
	}
	check := func(res *Result, want match) {
		t.Helper()
		got, w := resultRows(res), expectedRows(res.Fields, rows, want)
		if !slices.Equal(got, w) {
			t.Errorf("%d rows, want %d:%s", len(got), len(w), diffRows(got, w))
		}
		checkLocations(t, res)
	}
	first := lookup("id = 42")
	check(first, eq("id", int64(42)))
	if first.Stats.BytesRead == 0 || first.Plan.CommitsBehind == 0 {
		t.Fatalf("first lookup read %d bytes, %d commits behind: want a read and a lagging index", first.Stats.BytesRead, first.Plan.CommitsBehind)
	}
	misses := store.CacheStats().Lookup.Misses
	second := lookup("id = 42")
	check(second, eq("id", int64(42)))
	if second.Stats.BytesRead != 0 {
		t.Errorf("second lookup of the same key read %d bytes of range files", second.Stats.BytesRead)
	}
	if st := store.CacheStats().Lookup; st.Misses != misses || st.Hits == 0 {
		t.Errorf("second lookup: cache %+v, misses before %d; want only hits", st, misses)
	}
	// Keys the reconciliation changes: 10 deleted by an equality delete, 12
	// re-inserted, 160 rewritten, 310 appended, 43 untouched; all in pages
	// or reconciliations the first lookups cached, or read now.
	for _, k := range []int64{43, 10, 12, 160, 310} {
		check(lookup("id = "+strconv.FormatInt(k, 10)), eq("id", k))
	}
	many := lookup("id IN (10, 12, 160, 310, 42)")
	check(many, in("id", int64(10), int64(12), int64(160), int64(310), int64(42)))

	// Removing a range file drops its cached blocks.
	before := store.CacheStats().Lookup.Entries
	for _, f := range many.Plan.RangeFiles {
		if err := store.Remove(ctx, f.Path); err != nil {
			t.Fatal(err)
		}
	}
	if after := store.CacheStats().Lookup.Entries; after >= before {
		t.Errorf("the cache holds %d entries after its range files were removed, %d before", after, before)
	}
}

// TestPrepareReconcilesAhead: a lagging index prepared for the table's
// current snapshot answers lookups with the table's manifests gone, since
// Prepare reconciled it already and the store keeps that; unprepared, the
// same lookup needs them.
func TestPrepareReconcilesAhead(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 3)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[1]), buildPaged)
	rows := scanTable(t, tbl, tbl.CurrentSnapshot())
	p := New(Options{Store: objstore.New(objstore.Options{LookupCacheBytes: 64 << 20})})
	if err := p.Prepare(ctx, reconcile.Table(tbl), md, 0); err != nil {
		t.Fatal(err)
	}
	// Manifest lists and manifests are the Avro files of the metadata.
	dir := strings.TrimPrefix(strings.TrimRight(tbl.Location(), "/"), "file://") + "/metadata"
	avro, err := filepath.Glob(filepath.Join(dir, "*.avro"))
	if err != nil || len(avro) == 0 {
		t.Fatalf("no manifests under %s: %v", dir, err)
	}
	for _, f := range avro {
		if err := os.Rename(f, f+".gone"); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []int64{42, 10, 310} {
		res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: fmt.Sprintf("id = %d", k)})
		if err != nil {
			t.Fatalf("lookup of %d after Prepare, manifests gone: %v", k, err)
		}
		if res.Plan.CommitsBehind == 0 {
			t.Fatal("the index does not lag: nothing was reconciled")
		}
		got, want := resultRows(res), expectedRows(res.Fields, rows, eq("id", k))
		if !slices.Equal(got, want) {
			t.Errorf("id = %d: %d rows, want %d:%s", k, len(got), len(want), diffRows(got, want))
		}
		res.Release()
	}
	// The process keeps the manifests it read: forgotten, an unprepared
	// lookup must read them.
	tablescan.ForgetManifests()
	if _, err := New(Options{}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: "id = 42"}); err == nil {
		t.Error("an unprepared lookup of the lagging index succeeded without the manifests: the test shows nothing")
	}
}

// TestCachedSeekMatchesScan: lookups through cached blocks, which find
// the rows of the leading cluster field by binary search, answer as
// lookups that test every row do, for points, lists and ranges of an
// integer and of a string key, with and without a second filter, on a
// lagging index.
func TestCachedSeekMatchesScan(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 3)
	for name, wheres := range map[string][]string{
		"pk": {"id = 42", "id IN (0, 10, 12, 160, 299, 310, 1000)", "id >= 140 AND id < 170", "id > 5000",
			"id < 3", "id BETWEEN 100 AND 120 AND _pos >= 5"},
		"name_id": {"name = 'ada'", "name IN ('al', 'alan', 'zed')", "name = 'grace' AND id < 100", "name = 'nobody'"},
	} {
		md := newIndex(t, tbl, name)
		buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[1]), buildPaged)
		cached := New(Options{Store: objstore.New(objstore.Options{LookupCacheBytes: 64 << 20})})
		plain := New(Options{})
		for _, where := range wheres {
			for round := range 2 { // the second from cached blocks
				got, err := cached.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where})
				if err != nil {
					t.Fatalf("%s: %s: %v", name, where, err)
				}
				want, err := plain.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where})
				if err != nil {
					t.Fatalf("%s: %s: %v", name, where, err)
				}
				g, w := resultRows(got), resultRows(want)
				slices.Sort(g)
				slices.Sort(w)
				if !slices.Equal(g, w) {
					t.Errorf("%s: %s (round %d): cached %d rows, uncached %d:%s", name, where, round, len(g), len(w), diffRows(g, w))
				}
				if round == 1 && got.Stats.BytesRead != 0 {
					t.Errorf("%s: %s: the second lookup read %d bytes", name, where, got.Stats.BytesRead)
				}
				got.Release()
				want.Release()
			}
		}
	}
}

// TestWideLookupsInParallel: a lookup that reads most row groups (an IN of
// many keys, a predicate no cluster field answers) gives on 3 goroutines
// the answer, in the same order, and the counters it gives on one.
func TestWideLookupsInParallel(t *testing.T) {
	ctx := context.Background()
	tbl, snaps := staleHistory(t, 2)
	md := newIndex(t, tbl, "pk")
	buildIndex(t, tbl, md, tbl.SnapshotByID(snaps[1]), buildSmall)
	keys := make([]string, 0, 120)
	for k := 0; k < 330; k += 3 {
		keys = append(keys, strconv.Itoa(k))
	}
	for _, where := range []string{"id IN (" + strings.Join(keys, ", ") + ")", "_pos < 20", "id >= 0"} {
		one, err := New(Options{Parallelism: 1}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where})
		if err != nil {
			t.Fatal(err)
		}
		defer one.Release()
		three, err := New(Options{Parallelism: 3}).Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where})
		if err != nil {
			t.Fatal(err)
		}
		defer three.Release()
		if got, want := resultRows(three), resultRows(one); !slices.Equal(got, want) {
			t.Errorf("%.30s: %d rows on 3 goroutines, %d on one:%s", where, len(got), len(want), diffRows(got, want))
		}
		if three.Stats != one.Stats {
			t.Errorf("%.30s: counters on 3 goroutines %+v, on one %+v", where, three.Stats, one.Stats)
		}
		if !slices.EqualFunc(three.Plan.RangeFiles, one.Plan.RangeFiles, func(a, b FilePlan) bool { return a == b }) {
			t.Errorf("%.30s: range files on 3 goroutines %+v, on one %+v", where, three.Plan.RangeFiles, one.Plan.RangeFiles)
		}
		if one.Stats.Rows == 0 || one.Stats.RangeFilesRead < 2 {
			t.Errorf("%.30s: %d rows from %d range files: the case reads too little to test", where, one.Stats.Rows, one.Stats.RangeFilesRead)
		}
		checkLocations(t, three)
	}
}

// TestWarmFillsTheLookupCache: Warm reads every page of every range file
// of the index snapshot into the lookup cache, so that point lookups of
// any key then read nothing from storage and miss nothing, with the same
// answers; a budget stops it early, and without a cache it reads no page.
func TestWarmFillsTheLookupCache(t *testing.T) {
	ctx := context.Background()
	tbl, _ := staleHistory(t, 3)
	md := newIndex(t, tbl, "pk")
	// Several range files of several row groups of several pages each,
	// for the current snapshot: a lagging index would also make lookups
	// read the delete files of the commits since, which no warm-up covers.
	buildIndex(t, tbl, md, tbl.CurrentSnapshot(), compactor.RangeWriterOptions{TargetFileSize: 2 << 10, RowGroupRows: 32, PageSizeBytes: 64, BatchRows: 7})
	rows := scanTable(t, tbl, tbl.CurrentSnapshot())

	store := objstore.New(objstore.Options{LookupCacheBytes: 64 << 20})
	p := New(Options{Store: store})
	w, err := p.Warm(ctx, reconcile.Table(tbl), md, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if w.Of < 2 || w.Files != w.Of || w.Bytes <= 0 {
		t.Fatalf("warmed %+v: want every range file (more than one) and some bytes", w)
	}
	before := store.CacheStats().Lookup
	for _, k := range []int64{0, 10, 42, 160, 199, 310} {
		where := "id = " + strconv.FormatInt(k, 10)
		res, err := p.Lookup(ctx, reconcile.Table(tbl), md, Query{Where: where})
		if err != nil {
			t.Fatalf("lookup %s: %v", where, err)
		}
		got, want := resultRows(res), expectedRows(res.Fields, rows, eq("id", k))
		if !slices.Equal(got, want) {
			t.Errorf("%s after Warm: %d rows, want %d:%s", where, len(got), len(want), diffRows(got, want))
		}
		if res.Stats.BytesRead != 0 {
			t.Errorf("%s after Warm read %d bytes of range files", where, res.Stats.BytesRead)
		}
		res.Release()
	}
	if after := store.CacheStats().Lookup; after.Misses != before.Misses {
		t.Errorf("lookups after Warm missed the cache %d times", after.Misses-before.Misses)
	}

	// A budget of one byte reads the first page of the first file only.
	small := objstore.New(objstore.Options{LookupCacheBytes: 64 << 20})
	ws, err := New(Options{Store: small}).Warm(ctx, reconcile.Table(tbl), md, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Files != 1 || ws.Bytes <= 0 || ws.Bytes >= w.Bytes {
		t.Errorf("Warm with a 1-byte budget: %+v; want one file, fewer bytes than the whole %d", ws, w.Bytes)
	}

	// Without a lookup cache there is nothing to fill.
	none := objstore.New(objstore.Options{})
	wn, err := New(Options{Store: none}).Warm(ctx, reconcile.Table(tbl), md, 64<<20)
	if err != nil || wn.Bytes != 0 || wn.Files != 0 || wn.Of != w.Of {
		t.Errorf("Warm without a cache: %+v, %v; want no pages read, %d range files counted", wn, err, w.Of)
	}
}
