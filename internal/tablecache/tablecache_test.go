package tablecache_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/tablecache"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestLoadTableParsesAMetadataFileOnce: a table loaded twice from the same
// metadata file is the same table; a commit, made through another catalog
// as another process would, is seen at the next load; a dropped table is
// an error, not the table kept.
func TestLoadTableParsesAMetadataFileOnce(t *testing.T) {
	ctx := context.Background()
	inner, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, inner, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	db, err := indexcatalog.OpenSQLite(filepath.Join(strings.TrimPrefix(warehouse, "file://"), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := tablecache.New(inner, db, false, "default")
	id := tbl.Identifier()

	first, err := c.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Error("the metadata file did not change, yet the table was loaded again")
	}

	committed, _ := testtables.Append(t, tbl, testtables.OrderRows(0, 10, 0)...)
	third, err := c.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if third == first || third.MetadataLocation() != committed.MetadataLocation() {
		t.Errorf("after a commit: loaded %s, want %s", third.MetadataLocation(), committed.MetadataLocation())
	}
	if third.CurrentSnapshot() == nil || third.CurrentSnapshot().SnapshotID != committed.CurrentSnapshot().SnapshotID {
		t.Error("after a commit: the table loaded lacks the committed snapshot")
	}

	if err := inner.DropTable(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoadTable(ctx, id); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("dropped table: got %v, want catalog.ErrNoSuchTable", err)
	}
	if _, err := c.LoadTable(ctx, table.Identifier{"nowhere"}); err == nil {
		t.Error("a one-part identifier loaded a table")
	}
}

// countingCatalog counts the loads that reach the wrapped catalog, each
// made slow enough for concurrent callers to meet.
type countingCatalog struct {
	catalog.Catalog
	loads atomic.Int32
}

func (c *countingCatalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	c.loads.Add(1)
	time.Sleep(50 * time.Millisecond)
	return c.Catalog.LoadTable(ctx, id)
}

// TestConcurrentLoadsOfANewMetadataFileParseItOnce: callers that meet a
// new metadata file together (a daemon's update and its lookup service)
// wait for one load and get the same table; one that gives up does not
// fail the others.
func TestConcurrentLoadsOfANewMetadataFileParseItOnce(t *testing.T) {
	inner, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, inner, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	testtables.Append(t, tbl, testtables.OrderRows(0, 10, 0)...)
	db, err := indexcatalog.OpenSQLite(filepath.Join(strings.TrimPrefix(warehouse, "file://"), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	counting := &countingCatalog{Catalog: inner}
	c := tablecache.New(counting, db, false, "default")

	gone, cancel := context.WithCancel(context.Background())
	defer cancel()
	tables := make([]*table.Table, 8)
	var wg sync.WaitGroup
	for i := range tables {
		ctx := context.Background()
		if i == 0 {
			ctx = gone
		}
		wg.Go(func() {
			got, err := c.LoadTable(ctx, tbl.Identifier())
			if err != nil && i != 0 {
				t.Errorf("caller %d: %v", i, err)
			}
			tables[i] = got
		})
		if i == 0 {
			time.Sleep(10 * time.Millisecond) // the first caller starts the load, then gives up
			cancel()
		}
	}
	wg.Wait()
	if n := counting.loads.Load(); n != 1 {
		t.Errorf("8 concurrent callers loaded the metadata file %d times, want once", n)
	}
	for i, got := range tables[1:] {
		if got != tables[1] {
			t.Errorf("caller %d got another table than caller 1", i+1)
		}
	}
}
