package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// swapFixture is an orders table with a pk index of several snapshots, for
// putting one index file in another's place, as a partial restore from a
// backup does.
type swapFixture struct {
	t     *testing.T
	c     *cli
	tbl   *table.Table
	cat   indexcatalog.Catalog
	stage string
}

func newSwapFixture(t *testing.T) *swapFixture {
	warehouse, tbl := ordersTable(t, 100)
	f := &swapFixture{t: t, c: newCLI(t, warehouse, ""), tbl: tbl, stage: t.TempDir()}
	def := filepath.Join(t.TempDir(), "pk.json")
	if err := os.WriteFile(def, []byte(definitions["pk"]), 0o644); err != nil {
		t.Fatal(err)
	}
	f.c.ok("create", "--table", "test.orders", "--def", def)
	f.c.ok("build", "--table", "test.orders", "--index", "pk")
	f.cat = testtables.IndexCatalog(t, warehouse)
	return f
}

// upsert commits new versions of orders ids, as a CDC upsert does.
func (f *swapFixture) upsert(ids ...int64) {
	var keys, rows [][]any
	for _, id := range ids {
		keys = append(keys, []any{id})
		rows = append(rows, testtables.OrderRow(int(id), 1))
	}
	del := testtables.WriteEqualityDeleteFile(f.t, f.tbl, 0, nil, []int{1}, keys...)
	f.tbl, _ = testtables.AppendAndDelete(f.t, f.tbl, []iceberg.DataFile{del}, rows...)
}

// update runs one update of the index.
func (f *swapFixture) update() (int, string) {
	code, out, errs := f.c.run("run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", f.stage)
	return code, out + errs
}

// snapshots returns the index's metadata and the range files of each of its
// snapshots.
func (f *swapFixture) snapshots() (*format.Metadata, [][]format.TrackingEntry) {
	ctx := context.Background()
	md, _, err := f.cat.Load(ctx, []string{"test", "orders"}, "pk")
	if err != nil {
		f.t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, testtables.OrdersSchema)
	if err != nil {
		f.t.Fatal(err)
	}
	var out [][]format.TrackingEntry
	for i := range md.Snapshots {
		tr, _, err := objstore.Local().ReadTracking(ctx, md, &md.Snapshots[i], is)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, tr.Entries)
	}
	return md, out
}

// replace puts a copy of file from over file to and returns a function that
// puts the original back.
func (f *swapFixture) replace(to, from string) (restore func()) {
	to, from = strings.TrimPrefix(to, "file://"), strings.TrimPrefix(from, "file://")
	orig, err := os.ReadFile(to)
	if err != nil {
		f.t.Fatal(err)
	}
	data, err := os.ReadFile(from)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(to, orig, 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

// refused checks that lookup, verify and an update all refuse the index
// with a corruption naming path and saying why.
func (f *swapFixture) refused(path, why string, touch int64) {
	f.t.Helper()
	want := "corrupt file " + path
	code, out, errs := f.c.run("lookup", "--table", "test.orders", "--index", "pk", "--where", "id >= 0")
	if code != exitError || !strings.Contains(errs, want) || !strings.Contains(errs, why) {
		f.t.Errorf("lookup: exit %d, want %d and %q (%s)\n%s%s", code, exitError, want, why, out, errs)
	}
	code, out, errs = f.c.run("verify", "--table", "test.orders", "--index", "pk")
	if code != exitDifferent || !strings.Contains(out, want) || !strings.Contains(out, why) {
		f.t.Errorf("verify: exit %d, want %d and %q (%s)\n%s%s", code, exitDifferent, want, why, out, errs)
	}
	f.upsert(touch)
	if code, out := f.update(); code != exitError || !strings.Contains(out, want) || !strings.Contains(out, why) {
		f.t.Errorf("update: exit %d, want %d and %q (%s)\n%s", code, exitError, want, why, out)
	}
}

func TestSwappedIndexFilesAreRefused(t *testing.T) {
	f := newSwapFixture(t)
	f.upsert(97, 98, 99)
	if code, out := f.update(); code != exitOK {
		t.Fatalf("update: exit %d\n%s", code, out)
	}
	_, files := f.snapshots()
	if len(files) != 2 {
		t.Fatalf("%d index snapshots, want 2", len(files))
	}
	old, cur := files[0], files[1]
	inCur := func(e format.TrackingEntry) bool {
		return slices.ContainsFunc(cur, func(c format.TrackingEntry) bool { return c.FilePath == e.FilePath })
	}
	// The last file written and the last replaced hold the tail keys the
	// upsert touched (a merge may also rewrite a small neighbour).
	written, replaced := -1, -1
	for i, e := range cur {
		if !slices.ContainsFunc(old, func(o format.TrackingEntry) bool { return o.FilePath == e.FilePath }) {
			written = i
		}
	}
	for i, e := range old {
		if !inCur(e) {
			replaced = i
		}
	}
	if written < 0 || replaced < 0 {
		t.Fatal("the update rewrote no range file")
	}

	t.Run("range file of an older snapshot", func(t *testing.T) {
		f.t = t
		victim := cur[written]
		restore := f.replace(victim.FilePath, old[replaced].FilePath)
		// The older file holds the versions of 97 to 99 the upsert deleted:
		// read as the current one it would answer with deleted rows.
		f.refused(victim.FilePath, "its tracking entry says", 98)
		restore()
		if code, out := f.update(); code != exitOK {
			t.Fatalf("update after the file was put back: exit %d\n%s", code, out)
		}
		f.c.ok("verify", "--table", "test.orders", "--index", "pk")
	})

	t.Run("tracking file of another snapshot", func(t *testing.T) {
		f.t = t
		md, _ := f.snapshots()
		prev, last := md.Snapshots[len(md.Snapshots)-2], md.Snapshots[len(md.Snapshots)-1]
		f.replace(last.TrackingFile, prev.TrackingFile)
		f.refused(last.TrackingFile, "belongs to index snapshot", 97)
	})
}
