package indexcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	_ "github.com/lib/pq"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/testservers"
)

// backend opens a catalog implementation for a test.
type backend struct {
	name string
	// open returns a catalog, a second catalog over the same storage opened
	// on its own (as another process would), and where an index should live.
	open func(t *testing.T) (cat, other Catalog, location func(table []string, name string) string)
}

// backends lists every implementation; on Postgres and on S3 (SeaweedFS)
// when make itest started those servers (package testservers).
func backends(t *testing.T) []backend {
	bs := []backend{
		{name: "fs", open: func(t *testing.T) (Catalog, Catalog, func([]string, string) string) {
			return openFS(t, t.TempDir())
		}},
		{name: "fs-file-uri", open: func(t *testing.T) (Catalog, Catalog, func([]string, string) string) {
			return openFS(t, "file://"+t.TempDir())
		}},
		{name: "sqlite", open: func(t *testing.T) (Catalog, Catalog, func([]string, string) string) {
			return openSQLite(t, t.TempDir())
		}},
		{name: "sqlite-file-uri", open: func(t *testing.T) (Catalog, Catalog, func([]string, string) string) {
			return openSQLite(t, "file://"+t.TempDir())
		}},
	}
	if dsn := testservers.Postgres(t); dsn != "" {
		bs = append(bs, backend{name: "postgres", open: func(t *testing.T) (Catalog, Catalog, func([]string, string) string) {
			return openPostgres(t, dsn)
		}})
	}
	if _, ok := testservers.NewS3(t); ok {
		bs = append(bs, backend{name: "fs-s3", open: func(t *testing.T) (Catalog, Catalog, func([]string, string) string) {
			s3, _ := testservers.NewS3(t)
			return openFS(t, s3.Root, WithStore(objstore.New(objstore.Options{IOProperties: s3.Props})))
		}})
	}
	return bs
}

// files reads index files wherever the backends put them: local disk, or
// the S3 server of make itest.
var files = func() *objstore.Store {
	if endpoint := os.Getenv(testservers.S3EndpointEnv); endpoint != "" {
		return objstore.New(objstore.Options{IOProperties: testservers.S3Props(endpoint)})
	}
	return objstore.Local()
}()

func openFS(t *testing.T, root string, opts ...Option) (Catalog, Catalog, func([]string, string) string) {
	t.Helper()
	cat, err := NewFS(root, opts...)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewFS(root, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cat, other, func(table []string, name string) string {
		loc, err := cat.IndexLocation(table, name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
}

// warehouseLocation lays indexes out as the FS catalog does, under a
// warehouse that may be a file:// URI.
func warehouseLocation(warehouse string) func([]string, string) string {
	if uri, err := format.LocationURI(warehouse); err == nil {
		warehouse = uri // index locations are URIs
	}
	return func(table []string, name string) string {
		return objstore.Join(warehouse, append(slices.Clone(table), "indexes", name)...)
	}
}

func openSQLite(t *testing.T, warehouse string) (Catalog, Catalog, func([]string, string) string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.db")
	var cats [2]Catalog
	for i := range cats {
		db, err := OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if cats[i], err = NewSQL(context.Background(), db, DialectSQLite, ""); err != nil {
			t.Fatal(err)
		}
	}
	return cats[0], cats[1], warehouseLocation(warehouse)
}

func openPostgres(t *testing.T, dsn string) (Catalog, Catalog, func([]string, string) string) {
	t.Helper()
	// A catalog name of its own keeps this test's rows apart from other runs.
	name := "test-" + uuid.NewString()
	var cats [2]Catalog
	for i := range cats {
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if cats[i], err = NewSQL(context.Background(), db, DialectPostgres, name); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			t.Cleanup(func() {
				if _, err := db.Exec("DELETE FROM streamidx_indexes WHERE catalog_name = $1", name); err != nil {
					t.Errorf("clean up catalog %s: %v", name, err)
				}
			})
		}
	}
	return cats[0], cats[1], warehouseLocation(t.TempDir())
}

var orders = []string{"sales", "orders"}

// newIndex returns a valid SCALAR index: identity field 1, materialized
// bucket(16, ref 1), clustered by the bucket then the key.
func newIndex(location string) *format.Metadata {
	return &format.Metadata{
		FormatVersion:  format.FormatVersion,
		IndexUUID:      uuid.NewString(),
		TableUUID:      uuid.NewString(),
		Location:       location,
		Type:           format.TypeScalar,
		IdentityFields: []int{1},
		MaterializedFields: []format.ExprField{{
			FieldID:  1000,
			Type:     format.ExprFieldType,
			DataType: iceberg.PrimitiveTypes.Int32,
			Expr:     format.NewApply("bucket", format.IntLit(16), format.Ref{ID: 1}),
		}},
		ClusterSpec: []int{1000, 1},
		Properties:  map[string]string{},
	}
}

func addSnapshot(md *format.Metadata, id int64) {
	md.Snapshots = append(md.Snapshots, format.Snapshot{
		SnapshotID:            id,
		SourceTableSnapshotID: 7000 + id,
		TimestampMs:           1764400000000 + id,
		TrackingFile:          objstore.Join(md.Location, "metadata", fmt.Sprintf("tracking-%d.avro", id)),
	})
}

func snapshotIDs(md *format.Metadata) []int64 {
	var ids []int64
	for _, s := range md.Snapshots {
		ids = append(ids, s.SnapshotID)
	}
	return ids
}

// metadataFiles lists the metadata directory of an index, temporary files
// included, in byte order.
func metadataFiles(t *testing.T, indexLoc string) []string {
	t.Helper()
	entries, err := files.ReadDir(context.Background(), objstore.Join(indexLoc, "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func exists(t *testing.T, loc string) bool {
	t.Helper()
	_, err := files.ReadFile(context.Background(), loc)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func readAt(t *testing.T, loc string) *format.Metadata {
	t.Helper()
	md, err := readMetadata(context.Background(), files, loc)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

func commitSnapshot(t *testing.T, cat Catalog, table []string, name string, id int64) (*format.Metadata, string) {
	t.Helper()
	md, base, err := cat.Load(context.Background(), table, name)
	if err != nil {
		t.Fatal(err)
	}
	addSnapshot(md, id)
	loc, err := cat.Commit(context.Background(), table, name, base, md)
	if err != nil {
		t.Fatalf("commit snapshot %d: %v", id, err)
	}
	return md, loc
}

func TestCreateLoadListDrop(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, other, location := b.open(t)
			byCustomer := newIndex(location(orders, "by_customer"))
			loc, err := cat.Create(ctx, orders, "by_customer", byCustomer)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(loc, location(orders, "by_customer")+"/metadata/") || !exists(t, loc) {
				t.Errorf("created metadata file %s is not under the index location", loc)
			}
			if _, err := cat.Create(ctx, orders, "by_region", newIndex(location(orders, "by_region"))); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Create(ctx, orders, "by_customer", newIndex(location(orders, "by_customer"))); !errors.Is(err, ErrIndexExists) {
				t.Errorf("second create of by_customer: %v, want ErrIndexExists", err)
			}

			md, gotLoc, err := other.Load(ctx, orders, "by_customer")
			if err != nil {
				t.Fatal(err)
			}
			if gotLoc != loc || md.IndexUUID != byCustomer.IndexUUID || !slices.Equal(md.ClusterSpec, []int{1000, 1}) ||
				md.LastUpdatedMs == 0 || md.LastUpdatedMs != byCustomer.LastUpdatedMs {
				t.Errorf("load returned %s %+v, want %s %+v", gotLoc, md, loc, byCustomer)
			}

			names, err := other.List(ctx, orders)
			if err != nil || !slices.Equal(names, []string{"by_customer", "by_region"}) {
				t.Errorf("list: %q %v", names, err)
			}
			if names, err := cat.List(ctx, []string{"sales", "returns"}); err != nil || len(names) != 0 {
				t.Errorf("list of a table without indexes: %q %v", names, err)
			}

			if err := other.Drop(ctx, orders, "by_region"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := cat.Load(ctx, orders, "by_region"); !errors.Is(err, ErrIndexNotFound) {
				t.Errorf("load after drop: %v, want ErrIndexNotFound", err)
			}
			if err := cat.Drop(ctx, orders, "by_region"); !errors.Is(err, ErrIndexNotFound) {
				t.Errorf("second drop: %v, want ErrIndexNotFound", err)
			}
			if names, err := cat.List(ctx, orders); err != nil || !slices.Equal(names, []string{"by_customer"}) {
				t.Errorf("list after drop: %q %v", names, err)
			}
			md2 := newIndex(location(orders, "missing"))
			if _, err := cat.Commit(ctx, orders, "missing", loc, md2); !errors.Is(err, ErrIndexNotFound) {
				t.Errorf("commit to a missing index: %v, want ErrIndexNotFound", err)
			}
			// The dropped name can be created again.
			if _, err := cat.Create(ctx, orders, "by_region", newIndex(location(orders, "by_region"))); err != nil {
				t.Errorf("create after drop: %v", err)
			}
		})
	}
}

func TestNamespacesAreDistinct(t *testing.T) {
	ctx := context.Background()
	nested := []string{"a", "b", "t"}
	dotted := []string{"a.b", "t"}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, _, location := b.open(t)
			for _, table := range [][]string{nested, dotted} {
				if _, err := cat.Create(ctx, table, "idx", newIndex(location(table, "idx"))); err != nil {
					t.Fatalf("create on %q: %v", table, err)
				}
			}
			if err := cat.Drop(ctx, nested, "idx"); err != nil {
				t.Fatal(err)
			}
			if names, err := cat.List(ctx, dotted); err != nil || !slices.Equal(names, []string{"idx"}) {
				t.Errorf("index of %q after dropping the one of %q: %q %v", dotted, nested, names, err)
			}
			if names, err := cat.List(ctx, nested); err != nil || len(names) != 0 {
				t.Errorf("indexes of %q after drop: %q %v", nested, names, err)
			}
		})
	}
}

func TestCommitMovesPointer(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, other, location := b.open(t)
			created := newIndex(location(orders, "idx"))
			loc0, err := cat.Create(ctx, orders, "idx", created)
			if err != nil {
				t.Fatal(err)
			}
			md1, loc1 := commitSnapshot(t, cat, orders, "idx", 1)
			if loc1 == loc0 || !exists(t, loc0) {
				t.Errorf("commit wrote %s over or instead of %s", loc1, loc0)
			}
			want := []format.MetadataLogEntry{{MetadataFile: loc0, TimestampMs: created.LastUpdatedMs}}
			if !slices.Equal(md1.MetadataLog, want) || md1.LastUpdatedMs < created.LastUpdatedMs {
				t.Errorf("committed metadata log %+v last-updated %d, want %+v after %d", md1.MetadataLog, md1.LastUpdatedMs, want, created.LastUpdatedMs)
			}
			got, gotLoc, err := other.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			if gotLoc != loc1 || !slices.Equal(snapshotIDs(got), []int64{1}) || !slices.Equal(got.MetadataLog, want) {
				t.Errorf("load after commit: %s %+v", gotLoc, got)
			}
			_, loc2 := commitSnapshot(t, other, orders, "idx", 2)
			got, gotLoc, err = cat.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			if gotLoc != loc2 || !slices.Equal(snapshotIDs(got), []int64{1, 2}) || len(got.MetadataLog) != 2 || got.MetadataLog[1].MetadataFile != loc1 {
				t.Errorf("load after second commit: %s %+v", gotLoc, got)
			}
		})
	}
}

func TestStaleBaseConflicts(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			cat, other, location := b.open(t)
			indexLoc := location(orders, "idx")
			loc0, err := cat.Create(ctx, orders, "idx", newIndex(indexLoc))
			if err != nil {
				t.Fatal(err)
			}
			loser, base, err := other.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			winner, winLoc := commitSnapshot(t, cat, orders, "idx", 1)

			addSnapshot(loser, 2)
			if _, err := other.Commit(ctx, orders, "idx", base, loser); !errors.Is(err, ErrCommitConflict) {
				t.Fatalf("commit on stale base: %v, want ErrCommitConflict", err)
			}
			if len(loser.MetadataLog) != 0 {
				t.Errorf("a rejected commit changed the caller's metadata log: %+v", loser.MetadataLog)
			}
			got, gotLoc, err := other.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			if gotLoc != winLoc || !slices.Equal(snapshotIDs(got), []int64{1}) || got.LastUpdatedMs != winner.LastUpdatedMs {
				t.Errorf("after the rejected commit the index is %s %v, want the winner %s [1]", gotLoc, snapshotIDs(got), winLoc)
			}
			if files := metadataFiles(t, indexLoc); !slices.Equal(files, []string{objstore.Base(loc0), objstore.Base(winLoc)}) &&
				!slices.Equal(files, []string{objstore.Base(winLoc), objstore.Base(loc0)}) {
				t.Errorf("metadata files %q, want only the created and the winning file", files)
			}
		})
	}
}

// TestCommitLosesAfterWriting holds a commit after it wrote its metadata
// file and before its swap, lets another writer win, and checks that the
// held commit then loses, removes its file, and leaves the winner current.
func TestCommitLosesAfterWriting(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"fs", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			warehouse := gatedScheme + "://" + t.TempDir()
			var cat, other Catalog
			var location func([]string, string) string
			if name == "fs" {
				cat, other, location = openFS(t, warehouse)
			} else {
				cat, other, location = openSQLite(t, warehouse)
			}
			indexLoc := location(orders, "idx")
			if _, err := cat.Create(ctx, orders, "idx", newIndex(indexLoc)); err != nil {
				t.Fatal(err)
			}
			held, base, err := cat.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			addSnapshot(held, 1)

			reached, release := gate.arm()
			releaseOnce := sync.OnceFunc(func() { close(release) })
			defer releaseOnce()
			heldErr := make(chan error, 1)
			go func() {
				_, err := cat.Commit(ctx, orders, "idx", base, held)
				heldErr <- err
			}()
			<-reached
			_, winLoc := commitSnapshot(t, other, orders, "idx", 2)
			releaseOnce()
			if err := <-heldErr; !errors.Is(err, ErrCommitConflict) {
				t.Fatalf("held commit: %v, want ErrCommitConflict", err)
			}

			got, gotLoc, err := cat.Load(ctx, orders, "idx")
			if err != nil {
				t.Fatal(err)
			}
			if gotLoc != winLoc || !slices.Equal(snapshotIDs(got), []int64{2}) {
				t.Errorf("index is %s %v, want the winner %s [2]", gotLoc, snapshotIDs(got), winLoc)
			}
			if files := metadataFiles(t, gatedPath(indexLoc)); len(files) != 2 {
				t.Errorf("metadata files %q: the loser's file (or a temporary file) was left behind", files)
			}
		})
	}
}

func TestMetadataLogTrim(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		for _, deleteAfter := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/delete-after-commit=%t", b.name, deleteAfter), func(t *testing.T) {
				cat, _, location := b.open(t)
				md := newIndex(location(orders, "idx"))
				md.Properties[format.PropPreviousVersionsMax] = "2"
				md.Properties[format.PropDeleteAfterCommit] = fmt.Sprint(deleteAfter)
				loc0, err := cat.Create(ctx, orders, "idx", md)
				if err != nil {
					t.Fatal(err)
				}
				locs := []string{loc0}
				for id := int64(1); id <= 4; id++ {
					_, loc := commitSnapshot(t, cat, orders, "idx", id)
					locs = append(locs, loc)
				}
				got, _, err := cat.Load(ctx, orders, "idx")
				if err != nil {
					t.Fatal(err)
				}
				var logged []string
				for _, e := range got.MetadataLog {
					logged = append(logged, e.MetadataFile)
					if ts := readAt(t, e.MetadataFile).LastUpdatedMs; e.TimestampMs != ts {
						t.Errorf("log entry %s has timestamp %d, the file's last-updated-ms is %d", e.MetadataFile, e.TimestampMs, ts)
					}
				}
				if !slices.Equal(logged, locs[2:4]) {
					t.Errorf("metadata log %q, want the two files before the current %q", logged, locs[2:4])
				}
				for i, loc := range locs {
					want := i >= 2 || !deleteAfter
					if exists(t, loc) != want {
						t.Errorf("metadata file %d (%s) exists: %t, want %t", i, loc, !want, want)
					}
				}
			})
		}
	}
}

// commitStats counts what concurrent writers' commits did.
type commitStats struct {
	mu        sync.Mutex
	conflicts int
	won       []string
}

// countingCatalog records the outcome of every Commit.
type countingCatalog struct {
	Catalog
	stats *commitStats
}

func (c countingCatalog) Commit(ctx context.Context, table []string, name, base string, md *format.Metadata) (string, error) {
	loc, err := c.Catalog.Commit(ctx, table, name, base, md)
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	if errors.Is(err, ErrCommitConflict) {
		c.stats.conflicts++
	} else if err == nil {
		c.stats.won = append(c.stats.won, loc)
	}
	return loc, err
}
