package flush

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/objstore"
)

var expireSource = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64},
	iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String},
)

// expireFixture is an index in an FS catalog whose snapshots are published
// from hand-made range files.
type expireFixture struct {
	t     *testing.T
	cat   indexcatalog.Catalog
	table []string
	md    *format.Metadata
	is    *format.IndexSchema
	// start is when the fixture was made; files are written about then.
	start time.Time
	next  int64 // the next key to write
}

func newExpireFixture(t *testing.T) *expireFixture {
	t.Helper()
	cat, err := indexcatalog.NewFS("file://" + filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	md := &format.Metadata{FormatVersion: format.FormatVersion, IndexUUID: "11111111-2222-3333-4444-555555555555", TableUUID: "t",
		Type: format.TypeScalar, IdentityFields: []int{1, 2}, ClusterSpec: []int{1}}
	table := []string{"ns", "orders"}
	if _, err := cat.Create(context.Background(), table, "pk", md); err != nil {
		t.Fatal(err)
	}
	is, err := format.NewIndexSchema(md, expireSource)
	if err != nil {
		t.Fatal(err)
	}
	return &expireFixture{t: t, cat: cat, table: table, md: md, is: is, start: time.Now()}
}

func (f *expireFixture) schema(*format.Metadata) (*format.IndexSchema, error) { return f.is, nil }

// rangeFile writes one range file of a few entries with keys above all
// earlier ones, so any sequence of them is in cluster order.
func (f *expireFixture) rangeFile() format.TrackingEntry {
	f.t.Helper()
	w, err := compactor.NewRangeWriter(context.Background(), f.is, objstore.Join(f.md.Location, "data"), compactor.RangeWriterOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for range 3 {
		if err := w.Add(format.Key{f.next, "p"}); err != nil {
			f.t.Fatal(err)
		}
		f.next++
	}
	es, err := w.Close()
	if err != nil || len(es) != 1 {
		f.t.Fatalf("write range file: %v (%d files)", err, len(es))
	}
	return es[0]
}

// publish commits a snapshot of the given files stamped at.
func (f *expireFixture) publish(cat indexcatalog.Catalog, at time.Time, entries ...format.TrackingEntry) *format.Snapshot {
	f.t.Helper()
	s, _, err := Publish(context.Background(), cat, Publication{Table: f.table, Index: "pk", IndexUUID: f.md.IndexUUID,
		Schema: f.is, Entries: entries, SourceSnapshotID: at.UnixMilli()}, Options{Now: func() time.Time { return at }})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *expireFixture) load() *format.Metadata {
	f.t.Helper()
	md, _, err := f.cat.Load(context.Background(), f.table, "pk")
	if err != nil {
		f.t.Fatal(err)
	}
	return md
}

func (f *expireFixture) expire(opts ExpireOptions) *ExpireResult {
	f.t.Helper()
	res, err := Expire(context.Background(), f.cat, f.table, "pk", f.schema, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func localPath(loc string) string { return strings.TrimPrefix(loc, "file://") }

func exists(loc string) bool {
	_, err := os.Stat(localPath(loc))
	return err == nil
}

// later is a clock far enough ahead that every file written by the test is
// past the default grace.
func (f *expireFixture) later() func() time.Time {
	return func() time.Time { return f.start.Add(3 * time.Hour) }
}

// history publishes n snapshots an hour apart ending a day before start;
// every snapshot shares the first range file and adds its own. It returns
// the snapshots and each one's own file.
func (f *expireFixture) history(n int) ([]*format.Snapshot, []format.TrackingEntry) {
	shared := f.rangeFile()
	var snaps []*format.Snapshot
	var own []format.TrackingEntry
	entries := []format.TrackingEntry{shared}
	for i := range n {
		e := f.rangeFile()
		own = append(own, e)
		entries = append(entries, e)
		at := f.start.Add(-24 * time.Hour).Add(time.Duration(i-n) * time.Hour)
		snaps = append(snaps, f.publish(f.cat, at, entries...))
	}
	return snaps, own
}

func snapshotIDs(md *format.Metadata) []int64 {
	var out []int64
	for _, s := range md.Snapshots {
		out = append(out, s.SnapshotID)
	}
	return out
}

func ids(snaps []*format.Snapshot) []int64 {
	var out []int64
	for _, s := range snaps {
		out = append(out, s.SnapshotID)
	}
	return out
}

func TestExpireRetainLastDeletesOnlyUnsharedFiles(t *testing.T) {
	f := newExpireFixture(t)
	// Each snapshot i lists the shared file and the own files of 0..i, so
	// dropping snapshots frees only what the kept ones no longer list:
	// here nothing, since the kept snapshots list every earlier file too.
	snaps, own := f.history(5)
	res := f.expire(ExpireOptions{RetainLast: 2, Now: f.later()})
	if res.SnapshotsExpired != 3 {
		t.Fatalf("expired %d snapshots, want 3", res.SnapshotsExpired)
	}
	if got, want := snapshotIDs(f.load()), ids(snaps[3:]); !slices.Equal(got, want) {
		t.Fatalf("snapshots left %v, want %v", got, want)
	}
	var want []string
	for _, s := range snaps[:3] {
		want = append(want, s.TrackingFile)
	}
	if got := slices.Sorted(slices.Values(res.FilesDeleted)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("deleted %v, want only the expired tracking files %v", got, want)
	}
	for _, e := range own {
		if !exists(e.FilePath) {
			t.Errorf("range file %s, listed by a kept snapshot, was deleted", e.FilePath)
		}
	}
	for _, s := range snaps[3:] {
		if !exists(s.TrackingFile) {
			t.Errorf("tracking file of kept snapshot %d was deleted", s.SnapshotID)
		}
	}
	if res.BytesFreed <= 0 {
		t.Errorf("bytes freed %d", res.BytesFreed)
	}
}

func TestExpireDeletesFilesOfExpiredSnapshotsOnly(t *testing.T) {
	f := newExpireFixture(t)
	shared, a, b, c := f.rangeFile(), f.rangeFile(), f.rangeFile(), f.rangeFile()
	day := f.start.Add(-48 * time.Hour)
	s1 := f.publish(f.cat, day, shared, a)
	s2 := f.publish(f.cat, day.Add(time.Hour), shared, b)
	s3 := f.publish(f.cat, day.Add(2*time.Hour), shared, b, c)
	metaBefore, _ := filepath.Glob(filepath.Join(localPath(f.md.Location), "metadata", "*.metadata.json"))
	res := f.expire(ExpireOptions{RetainLast: 2, Now: f.later()})
	if got, want := snapshotIDs(f.load()), []int64{s2.SnapshotID, s3.SnapshotID}; !slices.Equal(got, want) {
		t.Fatalf("snapshots left %v, want %v", got, want)
	}
	want := []string{a.FilePath, s1.TrackingFile}
	if got := slices.Sorted(slices.Values(res.FilesDeleted)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	for _, loc := range []string{shared.FilePath, b.FilePath, c.FilePath, s2.TrackingFile, s3.TrackingFile} {
		if !exists(loc) {
			t.Errorf("%s is referenced by a kept snapshot but was deleted", loc)
		}
	}
	if exists(a.FilePath) || exists(s1.TrackingFile) {
		t.Error("files of the expired snapshot are still there")
	}
	for _, m := range metaBefore {
		if !exists(m) {
			t.Errorf("metadata file %s was deleted", m)
		}
	}
}

func TestExpireMaxAge(t *testing.T) {
	cases := []struct {
		name   string
		ages   []time.Duration // of the snapshots, oldest first
		maxAge time.Duration
		keep   []int // indexes of the snapshots left
	}{
		{"old ones go", []time.Duration{72 * time.Hour, 50 * time.Hour, 10 * time.Hour, 2 * time.Hour}, 24 * time.Hour, []int{2, 3}},
		{"the current snapshot stays however old", []time.Duration{72 * time.Hour, 50 * time.Hour}, 24 * time.Hour, []int{1}},
		{"no limit keeps all", []time.Duration{72 * time.Hour, 50 * time.Hour}, 0, []int{0, 1}},
		{"recently superseded stays", []time.Duration{72 * time.Hour, 10 * time.Minute}, 24 * time.Hour, []int{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newExpireFixture(t)
			now := f.start.Add(time.Hour)
			var snaps []*format.Snapshot
			for _, age := range c.ages {
				snaps = append(snaps, f.publish(f.cat, now.Add(-age), f.rangeFile()))
			}
			res := f.expire(ExpireOptions{RetainLast: 100, MaxAge: c.maxAge, Now: func() time.Time { return now }})
			var want []int64
			for _, i := range c.keep {
				want = append(want, snaps[i].SnapshotID)
			}
			if got := snapshotIDs(f.load()); !slices.Equal(got, want) || res.SnapshotsExpired != len(snaps)-len(want) {
				t.Errorf("snapshots left %v (expired %d), want %v", got, res.SnapshotsExpired, want)
			}
		})
	}
}

func TestExpireNeverTheCurrentSnapshot(t *testing.T) {
	f := newExpireFixture(t)
	s := f.publish(f.cat, f.start.Add(-1000*time.Hour), f.rangeFile())
	res := f.expire(ExpireOptions{RetainLast: -3, MaxAge: time.Millisecond, Now: f.later()})
	if res.SnapshotsExpired != 0 || !slices.Equal(snapshotIDs(f.load()), []int64{s.SnapshotID}) || len(res.FilesDeleted) != 0 {
		t.Errorf("the only snapshot must stay with its files: %+v", res)
	}
}

func TestExpireOrphansRespectGrace(t *testing.T) {
	f := newExpireFixture(t)
	kept := f.rangeFile()
	f.publish(f.cat, f.start.Add(-48*time.Hour), kept)
	data := filepath.Join(localPath(f.md.Location), "data")
	meta := filepath.Join(localPath(f.md.Location), "metadata")
	write := func(path string, age time.Duration) string {
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		return path
	}
	young := write(filepath.Join(data, "young.parquet"), time.Minute)
	old := write(filepath.Join(data, "old.parquet"), 3*time.Hour)
	oldTmp := write(filepath.Join(data, ".old.parquet.1234.tmp"), 3*time.Hour)
	oldTracking := write(filepath.Join(meta, "snap-1-abc.avro"), 3*time.Hour)
	oldOther := write(filepath.Join(meta, "notes.txt"), 3*time.Hour)
	oldMetadata := write(filepath.Join(meta, "00007-0b1f.metadata.json"), 3*time.Hour)
	res := f.expire(ExpireOptions{})
	var got []string
	for _, d := range res.FilesDeleted {
		got = append(got, localPath(d))
	}
	if want := []string{oldTmp, old, oldTracking}; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	for _, p := range []string{young, oldOther, oldMetadata, localPath(kept.FilePath)} {
		if !exists(p) {
			t.Errorf("%s must be kept", p)
		}
	}
	if exists(old) || exists(oldTracking) {
		t.Error("old orphans are still there")
	}
}

func TestExpireDryRunChangesNothing(t *testing.T) {
	f := newExpireFixture(t)
	shared, a, b := f.rangeFile(), f.rangeFile(), f.rangeFile()
	day := f.start.Add(-48 * time.Hour)
	s1 := f.publish(f.cat, day, shared, a)
	f.publish(f.cat, day.Add(time.Hour), shared, b)
	before := snapshotIDs(f.load())
	res := f.expire(ExpireOptions{RetainLast: 1, Now: f.later(), DryRun: true})
	if res.SnapshotsExpired != 1 || !slices.Contains(res.FilesDeleted, a.FilePath) || !slices.Contains(res.FilesDeleted, s1.TrackingFile) {
		t.Errorf("a dry run must report what it would do: %+v", res)
	}
	if got := snapshotIDs(f.load()); !slices.Equal(got, before) {
		t.Errorf("a dry run changed the snapshots: %v, was %v", got, before)
	}
	for _, loc := range res.FilesDeleted {
		if !exists(loc) {
			t.Errorf("a dry run deleted %s", loc)
		}
	}
}

// racingCatalog runs race before the first commit it forwards, as if
// another writer had committed just then.
type racingCatalog struct {
	indexcatalog.Catalog
	once sync.Once
	race func()
}

func (c *racingCatalog) Commit(ctx context.Context, table []string, name, base string, md *format.Metadata) (string, error) {
	c.once.Do(c.race)
	return c.Catalog.Commit(ctx, table, name, base, md)
}

func TestExpireKeepsAConcurrentCommit(t *testing.T) {
	f := newExpireFixture(t)
	snaps, _ := f.history(4)
	var racer *format.Snapshot
	var racerFile format.TrackingEntry
	cat := &racingCatalog{Catalog: f.cat, race: func() {
		racerFile = f.rangeFile()
		racer = f.publish(f.cat, f.start.Add(-time.Hour), racerFile)
	}}
	res, err := Expire(context.Background(), cat, f.table, "pk", f.schema, ExpireOptions{RetainLast: 2, Now: f.later()})
	if err != nil {
		t.Fatal(err)
	}
	if racer == nil {
		t.Fatal("the racing commit did not run")
	}
	// On top of the racer's commit, the last two are snapshot 3 and the racer.
	want := []int64{snaps[3].SnapshotID, racer.SnapshotID}
	if got := snapshotIDs(f.load()); !slices.Equal(got, want) {
		t.Fatalf("snapshots left %v, want %v: the concurrent commit was lost or the expiry not re-applied", got, want)
	}
	if res.SnapshotsExpired != 3 {
		t.Errorf("expired %d, want 3", res.SnapshotsExpired)
	}
	if !exists(racerFile.FilePath) || !exists(racer.TrackingFile) {
		t.Error("files of the concurrent commit were deleted")
	}
}

func TestExpireFailsWhenATrackingFileIsMissing(t *testing.T) {
	f := newExpireFixture(t)
	snaps, own := f.history(2)
	if err := os.Remove(localPath(snaps[1].TrackingFile)); err != nil {
		t.Fatal(err)
	}
	_, err := Expire(context.Background(), f.cat, f.table, "pk", f.schema, ExpireOptions{RetainLast: 5, Now: f.later()})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(snaps[1].SnapshotID)) {
		t.Fatalf("got %v, want an error naming snapshot %d", err, snaps[1].SnapshotID)
	}
	for _, e := range own {
		if !exists(e.FilePath) {
			t.Errorf("%s was deleted although what the snapshots reference is unknown", e.FilePath)
		}
	}
}

// TestRetainLastBoundsHistoryAfterTheGrace pins what README says of
// run.retain-snapshots: snapshots beyond the newest N expire once they
// were superseded more than the grace (1h) ago; until then a lookup or an
// update in flight may still read them, so a burst of commits keeps up to
// N plus the snapshots of the last hour.
func TestRetainLastBoundsHistoryAfterTheGrace(t *testing.T) {
	f := newExpireFixture(t)
	var snaps []*format.Snapshot
	for i := range 15 { // one a minute
		snaps = append(snaps, f.publish(f.cat, f.start.Add(time.Duration(i)*time.Minute), f.rangeFile()))
	}
	last := f.start.Add(14 * time.Minute)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return last.Add(d) } }
	if res := f.expire(ExpireOptions{RetainLast: 10, Now: at(30 * time.Minute)}); res.SnapshotsExpired != 0 {
		t.Errorf("half an hour after the burst: %d snapshots expired, want none (all superseded within the grace)", res.SnapshotsExpired)
	}
	if res := f.expire(ExpireOptions{RetainLast: 10, Now: at(2 * time.Hour)}); res.SnapshotsExpired != 5 {
		t.Errorf("two hours after the burst: %d snapshots expired, want the 5 beyond the newest 10", res.SnapshotsExpired)
	}
	if got, want := snapshotIDs(f.load()), ids(snaps[5:]); !slices.Equal(got, want) {
		t.Errorf("snapshots left %v, want %v", got, want)
	}
}

// TestExpireRemembersWhatTrackingFilesList: with References, an expiry
// reads only the tracking files no earlier one read (a daemon committing
// every second retains an hour of index snapshots), forgets those of
// expired snapshots, and still deletes exactly what no kept snapshot lists.
func TestExpireRemembersWhatTrackingFilesList(t *testing.T) {
	f := newExpireFixture(t)
	refs := NewReferences()
	day := f.start.Add(-48 * time.Hour)
	shared, a, b := f.rangeFile(), f.rangeFile(), f.rangeFile()
	s1 := f.publish(f.cat, day, shared, a)
	s2 := f.publish(f.cat, day.Add(time.Hour), shared, b)
	if res := f.expire(ExpireOptions{RetainLast: 5, Now: f.later(), References: refs}); res.SnapshotsExpired != 0 || len(res.FilesDeleted) != 0 {
		t.Fatalf("first expiry: %d snapshots expired, %v deleted; want nothing", res.SnapshotsExpired, res.FilesDeleted)
	}
	if n := refs.Len(); n != 2 {
		t.Fatalf("remembers %d tracking files after the first expiry, want 2", n)
	}
	// Read once, s2's tracking file is not read again: made unreadable now,
	// it does not stop the next expiry (it would without References, below).
	if err := os.WriteFile(localPath(s2.TrackingFile), []byte("not a tracking file"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := f.rangeFile()
	s3 := f.publish(f.cat, day.Add(2*time.Hour), shared, b, c)
	res := f.expire(ExpireOptions{RetainLast: 2, Now: f.later(), References: refs})
	if got, want := snapshotIDs(f.load()), []int64{s2.SnapshotID, s3.SnapshotID}; !slices.Equal(got, want) {
		t.Fatalf("snapshots left %v, want %v", got, want)
	}
	want := []string{a.FilePath, s1.TrackingFile}
	if got := slices.Sorted(slices.Values(res.FilesDeleted)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	for _, loc := range []string{shared.FilePath, b.FilePath, c.FilePath, s3.TrackingFile} {
		if !exists(loc) {
			t.Errorf("%s is listed by a kept snapshot but was deleted", loc)
		}
	}
	if n := refs.Len(); n != 2 {
		t.Errorf("remembers %d tracking files, want only the 2 of kept snapshots", n)
	}
	if _, err := Expire(context.Background(), f.cat, f.table, "pk", f.schema, ExpireOptions{RetainLast: 2, Now: f.later()}); err == nil {
		t.Error("without References an unreadable tracking file did not stop the clean-up, so the expiry above did not show that References spared the read")
	}
}
