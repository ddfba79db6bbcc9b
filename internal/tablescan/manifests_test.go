package tablescan

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"

	"github.com/streamidx/streamidx/internal/testtables"
)

// countingOpens counts the files opened through an IO.
type countingOpens struct {
	iceio.IO
	opens atomic.Int64
}

func (c *countingOpens) Open(name string) (iceio.File, error) {
	c.opens.Add(1)
	return c.IO.Open(name)
}

// A manifest is read once: every later snapshot lists it again, and the
// delta of each commit would otherwise read every manifest of the table.
// The cache holds whole manifests up to its number of entries, dropping
// the least recently added.
func TestLiveEntriesReadsEachManifestOnce(t *testing.T) {
	ctx := context.Background()
	tbl := newTable(t, 2, nil)
	for i := range 3 {
		tbl, _ = testtables.Append(t, tbl, r(int64(i), "x", 1))
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) != 3 {
		t.Fatalf("%d manifests, want one per append", len(manifests))
	}
	io := &countingOpens{IO: fs}
	c := newSliceCache[Entry](2)
	read := func(manifests ...iceberg.ManifestFile) {
		t.Helper()
		for _, m := range manifests {
			entries, err := liveEntries(ctx, c, io, m)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].File.ContentType() != 0 || entries[0].Seq < 1 {
				t.Fatalf("manifest %s: entries %v, want its one data file", m.FilePath(), entries)
			}
		}
	}
	read(manifests...)
	if n := io.opens.Load(); n != 3 {
		t.Fatalf("%d opens for 3 manifests", n)
	}
	if c.held != 2 || len(c.m) != 2 {
		t.Errorf("the cache holds %d entries of %d manifests, want 2 of 2 (its bound)", c.held, len(c.m))
	}
	// The two held are not read again; the one dropped is.
	read(manifests[1:]...)
	if n := io.opens.Load(); n != 3 {
		t.Errorf("%d opens after reading the 2 manifests held again, want 3: none read again", n)
	}
	read(manifests[0])
	if n := io.opens.Load(); n != 4 {
		t.Errorf("%d opens after reading the dropped manifest again, want 4", n)
	}
}

// A plan reads its snapshot's manifest list and manifests through the
// process's caches: the table delta that follows a build (the daemon's
// first update) then reads none of them again.
func TestPlanFillsTheManifestCaches(t *testing.T) {
	ctx := context.Background()
	tbl := newTable(t, 2, nil)
	for i := range 3 {
		tbl, _ = testtables.Append(t, tbl, r(int64(i), "x", 1))
	}
	tbl = testtables.AddEqualityDeletes(t, tbl, []int{1}, []any{int64(1)})
	ForgetManifests()
	t.Cleanup(ForgetManifests)
	snap := tbl.CurrentSnapshot()
	p, err := NewPlan(ctx, tbl, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 3 || p.DeleteFiles() != 1 {
		t.Fatalf("planned %d data files and %d delete files, want 3 and 1", len(p.Files), p.DeleteFiles())
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	io := &countingOpens{IO: fs}
	manifests, err := ManifestList(io, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		if _, err := LiveEntries(ctx, io, m); err != nil {
			t.Fatal(err)
		}
	}
	if n := io.opens.Load(); n != 0 || len(manifests) != 4 {
		t.Errorf("after the plan, reading the manifest list and its %d manifests opened %d files, want none", len(manifests), n)
	}
}
