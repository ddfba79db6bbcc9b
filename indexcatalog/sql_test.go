package indexcatalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	"github.com/streamidx/streamidx/internal/objstore"
)

func openSQLiteDB(t *testing.T) (*SQLCatalog, func(string) *SQLCatalog) {
	t.Helper()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	named := func(name string) *SQLCatalog {
		cat, err := NewSQL(context.Background(), db, DialectSQLite, name)
		if err != nil {
			t.Fatal(err)
		}
		return cat
	}
	return named(""), named
}

func TestSQLRowTracksPointerAndPrevious(t *testing.T) {
	ctx := context.Background()
	cat, _ := openSQLiteDB(t)
	location := warehouseLocation(t.TempDir())
	table := []string{"a", "b", "orders"}
	loc0, err := cat.Create(ctx, table, "idx", newIndex(location(table, "idx")))
	if err != nil {
		t.Fatal(err)
	}
	_, loc1 := commitSnapshot(t, cat, table, "idx", 1)
	var catalogName, ns, tbl, index, current string
	var previous *string
	err = cat.db.QueryRow(`SELECT catalog_name, table_namespace, table_name, index_name, metadata_location, previous_metadata_location
		FROM streamidx_indexes`).Scan(&catalogName, &ns, &tbl, &index, &current, &previous)
	if err != nil {
		t.Fatal(err)
	}
	if catalogName != DefaultCatalogName || ns != "a.b" || tbl != "orders" || index != "idx" || current != loc1 || previous == nil || *previous != loc0 {
		t.Errorf("row (%s, %s, %s, %s, %s, %v), want (default, a.b, orders, idx, %s, %s)", catalogName, ns, tbl, index, current, previous, loc1, loc0)
	}
	if name := objstore.Base(loc1); name[:6] != "00001-" || filepath.Ext(name) != ".json" {
		t.Errorf("second metadata file is named %s, want 00001-<uuid>.metadata.json", name)
	}
}

func TestSQLCatalogNamesAreSeparate(t *testing.T) {
	ctx := context.Background()
	def, named := openSQLiteDB(t)
	other := named("other")
	location := warehouseLocation(t.TempDir())
	if _, err := def.Create(ctx, orders, "idx", newIndex(location(orders, "idx"))); err != nil {
		t.Fatal(err)
	}
	if names, err := other.List(ctx, orders); err != nil || len(names) != 0 {
		t.Errorf("catalog other lists %q %v, want nothing", names, err)
	}
	if _, _, err := other.Load(ctx, orders, "idx"); !errors.Is(err, ErrIndexNotFound) {
		t.Errorf("catalog other loads the default catalog's index: %v", err)
	}
	if _, err := other.Create(ctx, orders, "idx", newIndex(location(orders, "idx2"))); err != nil {
		t.Errorf("same name in another catalog: %v", err)
	}
	// Opening the catalog again keeps its table and rows.
	again := named("")
	if names, err := again.List(ctx, orders); err != nil || !slices.Equal(names, []string{"idx"}) {
		t.Errorf("after reopening: %q %v", names, err)
	}
}

// TestSQLSharesDatabaseWithIcebergCatalog puts the index catalog beside
// iceberg-go's SQL catalog and checks that both name a table the same way,
// dotted namespace levels included.
func TestSQLSharesDatabaseWithIcebergCatalog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := OpenSQLite(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ice, err := sqlcat.NewCatalog("default", db, sqlcat.SQLite, iceberg.Properties{"init_catalog_tables": "true"})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := NewSQL(ctx, db, Dialect(sqlcat.SQLite), "default")
	if err != nil {
		t.Fatal(err)
	}
	location := warehouseLocation(filepath.Join(dir, "warehouse"))
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	tables := [][]string{{"sales", "orders"}, {"a.b", "c", "t"}}
	for _, table := range tables {
		if err := ice.CreateNamespace(ctx, table[:len(table)-1], nil); err != nil {
			t.Fatal(err)
		}
		tableLoc := objstore.Join(filepath.Join(dir, "warehouse"), table...)
		if _, err := ice.CreateTable(ctx, table, schema, catalog.WithLocation(tableLoc)); err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Create(ctx, table, "idx", newIndex(location(table, "idx"))); err != nil {
			t.Fatal(err)
		}
	}
	var joined int
	err = db.QueryRow(`SELECT count(*) FROM iceberg_tables t JOIN streamidx_indexes i
		ON t.catalog_name = i.catalog_name AND t.table_namespace = i.table_namespace AND t.table_name = i.table_name`).Scan(&joined)
	if err != nil {
		t.Fatal(err)
	}
	if joined != len(tables) {
		t.Errorf("%d of %d indexes name a table of the Iceberg catalog", joined, len(tables))
	}
}

func TestSQLCommitRefusesAnotherIndexesMetadata(t *testing.T) {
	ctx := context.Background()
	cat, _ := openSQLiteDB(t)
	location := warehouseLocation(t.TempDir())
	indexLoc := location(orders, "idx")
	base, err := cat.Create(ctx, orders, "idx", newIndex(indexLoc))
	if err != nil {
		t.Fatal(err)
	}
	stranger := newIndex(indexLoc)
	if _, err := cat.Commit(ctx, orders, "idx", base, stranger); err == nil || errors.Is(err, ErrCommitConflict) {
		t.Errorf("commit of another index's metadata: %v, want a non-conflict error", err)
	}
	if files := metadataFiles(t, indexLoc); len(files) != 1 {
		t.Errorf("metadata files %q, want only the created one", files)
	}
}

func TestOpenSQLiteTakesPathLiterally(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd dir #1", "100% ?.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := NewSQL(context.Background(), db, DialectSQLite, ""); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q (%v), want wal", mode, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at the given path: %v", err)
	}
}

func TestNewSQLRejectsUnknownDialect(t *testing.T) {
	if _, err := NewSQL(context.Background(), nil, "mysql", ""); err == nil {
		t.Error("mysql dialect accepted")
	}
}

func TestNamespaceKey(t *testing.T) {
	for _, tc := range []struct {
		ns   []string
		want string
	}{
		{[]string{"sales"}, "sales"},
		{[]string{"a", "b"}, "a.b"},
		{[]string{"a.b"}, `__iceberg_namespace_v1__:["a.b"]`},
		{[]string{"a.b", "c"}, `__iceberg_namespace_v1__:["a.b","c"]`},
		{[]string{"__iceberg_namespace_v1__:x"}, `__iceberg_namespace_v1__:["__iceberg_namespace_v1__:x"]`},
	} {
		if got := namespaceKey(tc.ns); got != tc.want {
			t.Errorf("namespaceKey(%q) = %s, want %s", tc.ns, got, tc.want)
		}
	}
}

func TestRebind(t *testing.T) {
	for _, tc := range []struct {
		dialect    Dialect
		query, out string
	}{
		{DialectSQLite, "a = ? AND b = ?", "a = ? AND b = ?"},
		{DialectPostgres, "a = ? AND b = ?", "a = $1 AND b = $2"},
		{DialectPostgres, "SELECT 1", "SELECT 1"},
	} {
		c := &SQLCatalog{dialect: tc.dialect}
		if got := c.rebind(tc.query); got != tc.out {
			t.Errorf("%s rebind(%q) = %q, want %q", tc.dialect, tc.query, got, tc.out)
		}
	}
}

func TestNextSQLVersion(t *testing.T) {
	for _, tc := range []struct {
		base   string
		logLen int
		want   int
	}{
		{"s3://b/i/metadata/00000-6f1d.metadata.json", 1, 1},
		{"/w/i/metadata/00041-6f1d.metadata.json", 5, 42},
		{"/w/i/metadata/123456-6f1d.metadata.json", 5, 123457},
		{"/w/i/metadata/v3.metadata.json", 7, 7},
		{"/w/i/metadata/-x.metadata.json", 2, 2},
	} {
		if got := nextSQLVersion(tc.base, tc.logLen); got != tc.want {
			t.Errorf("nextSQLVersion(%s, %d) = %d, want %d", tc.base, tc.logLen, got, tc.want)
		}
	}
}
