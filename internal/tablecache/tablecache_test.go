package tablecache_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

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
