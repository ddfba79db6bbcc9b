package objstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testtables"
)

// storedIndex is a pk index on the orders schema with real range files and
// tracking files, written through a Store.
type storedIndex struct {
	store   *objstore.Store
	md      *format.Metadata
	is      *format.IndexSchema
	entries []format.TrackingEntry
}

func newStoredIndex(t *testing.T) *storedIndex {
	t.Helper()
	ctx := context.Background()
	def, err := indexdef.Parse([]byte(`{"name":"pk","identity":["id"],"materialized":["_file","_pos"],"cluster":["id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	md, err := def.Resolve(testtables.OrdersSchema, "table-uuid", "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, testtables.OrdersSchema)
	if err != nil {
		t.Fatal(err)
	}
	x := &storedIndex{store: objstore.Local(), md: md, is: is}
	w, err := compactor.NewRangeWriter(ctx, is, objstore.Join(md.Location, "data"),
		compactor.RangeWriterOptions{Store: x.store, TargetFileSize: 1, BatchRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	for id := range int64(45) { // files of 10 entries and a last one of 5
		if err := w.Add(format.Key{id, "s3://warehouse/data/f.parquet", id}); err != nil {
			t.Fatal(err)
		}
	}
	if x.entries, err = w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(x.entries) < 2 {
		t.Fatalf("want several range files, got %d", len(x.entries))
	}
	return x
}

// snapshot writes a tracking file of entries with opts and returns an index
// snapshot that references it.
func (x *storedIndex) snapshot(t *testing.T, id int64, entries []format.TrackingEntry, opts format.TrackingWriteOptions) *format.Snapshot {
	t.Helper()
	loc := objstore.Join(x.md.Location, "metadata", fmt.Sprintf("snap-%d.avro", id))
	w, err := x.store.Create(context.Background(), loc, objstore.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := format.WriteTrackingFile(w, x.is, entries, opts); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &format.Snapshot{SnapshotID: id, TrackingFile: loc}
}

// wantCorruption checks that err is a corruption naming path and saying why.
func wantCorruption(t *testing.T, err error, path, why string) {
	t.Helper()
	got, ok := format.CorruptPath(err)
	if !format.IsCorruption(err) || !ok || got != path || !strings.Contains(err.Error(), why) {
		t.Fatalf("error %v, want a corruption of %s saying %q", err, path, why)
	}
}

func TestReadTrackingChecksTheSnapshotItBelongsTo(t *testing.T) {
	ctx := context.Background()
	x := newStoredIndex(t)
	own := x.snapshot(t, 1, x.entries, format.TrackingWriteOptions{IndexUUID: x.md.IndexUUID, SnapshotID: 1})
	tr, n, err := x.store.ReadTracking(ctx, x.md, own, x.is)
	if err != nil || len(tr.Entries) != len(x.entries) || n != tr.Size || n == 0 {
		t.Fatalf("read %d entries, %d bytes, %v; want %d entries and the file's size", len(tr.Entries), n, err, len(x.entries))
	}
	if _, n, err := x.store.ReadTracking(ctx, x.md, own, x.is); err != nil || n != 0 {
		t.Fatalf("second read: %d bytes, %v; want the cache to serve it", n, err)
	}

	// Another snapshot's file under this snapshot's name.
	other := x.snapshot(t, 2, x.entries[:1], format.TrackingWriteOptions{IndexUUID: x.md.IndexUUID, SnapshotID: 2})
	swapped := &format.Snapshot{SnapshotID: 3, TrackingFile: other.TrackingFile}
	_, _, err = x.store.ReadTracking(ctx, x.md, swapped, x.is)
	wantCorruption(t, err, other.TrackingFile, "belongs to index snapshot 2, not to snapshot 3")
	// The check holds when the file is already cached, too.
	if _, _, err := x.store.ReadTracking(ctx, x.md, other, x.is); err != nil {
		t.Fatal(err)
	}
	_, _, err = x.store.ReadTracking(ctx, x.md, swapped, x.is)
	wantCorruption(t, err, other.TrackingFile, "belongs to index snapshot 2")

	// Another index's file.
	foreign := x.snapshot(t, 4, x.entries, format.TrackingWriteOptions{IndexUUID: "another-index", SnapshotID: 4})
	_, _, err = x.store.ReadTracking(ctx, x.md, foreign, x.is)
	wantCorruption(t, err, foreign.TrackingFile, "belongs to index another-index")

	// A file written before tracking files named their snapshot passes.
	old := x.snapshot(t, 5, x.entries, format.TrackingWriteOptions{})
	if tr, _, err := x.store.ReadTracking(ctx, x.md, old, x.is); err != nil || len(tr.Entries) != len(x.entries) {
		t.Fatalf("a tracking file without snapshot-id: %v", err)
	}
}

func TestOpenRangeChecksTheTrackingEntry(t *testing.T) {
	ctx := context.Background()
	x := newStoredIndex(t)
	te := x.entries[0]
	r, err := x.store.OpenRange(ctx, &te, x.is, format.RangeFileReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.NumRows() != te.RecordCount || r.BytesRead() == 0 {
		t.Errorf("%d rows (%d bytes read), want %d", r.NumRows(), r.BytesRead(), te.RecordCount)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Another range file of the index copied over this one.
	data, err := os.ReadFile(strings.TrimPrefix(x.entries[len(x.entries)-1].FilePath, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	victim := x.entries[1]
	if data2, _ := os.ReadFile(strings.TrimPrefix(victim.FilePath, "file://")); len(data2) == len(data) {
		t.Fatal("the test needs range files of different sizes")
	}
	if err := os.WriteFile(strings.TrimPrefix(victim.FilePath, "file://"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = x.store.OpenRange(ctx, &victim, x.is, format.RangeFileReadOptions{})
	wantCorruption(t, err, victim.FilePath, "its tracking entry says")

	// A file of the right size whose entry counts other entries.
	miscounted := x.entries[0]
	miscounted.RecordCount++
	_, err = x.store.OpenRange(ctx, &miscounted, x.is, format.RangeFileReadOptions{})
	wantCorruption(t, err, miscounted.FilePath, "entries, its tracking entry says")

	// A missing file is no corruption: storage may come back.
	gone := x.entries[0]
	gone.FilePath = "file://" + filepath.Join(t.TempDir(), "gone.parquet")
	if _, err := x.store.OpenRange(ctx, &gone, x.is, format.RangeFileReadOptions{}); err == nil || format.IsCorruption(err) {
		t.Errorf("a missing range file: %v, want a plain error", err)
	}
}
