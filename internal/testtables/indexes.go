package testtables

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/indexdef"
)

// IndexCatalog opens the SQL index catalog that the CLI uses for the
// warehouse of NewCatalog: the same SQLite database as the table catalog.
func IndexCatalog(t testing.TB, warehouse string) indexcatalog.Catalog {
	t.Helper()
	db, err := indexcatalog.OpenSQLite(filepath.Join(strings.TrimPrefix(warehouse, "file://"), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ic, err := indexcatalog.NewSQL(context.Background(), db, indexcatalog.DialectSQLite, "default")
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// CreateIndexes resolves each index definition (JSON or YAML) against tbl
// and creates the index in ic, at the table's location under indexes/.
func CreateIndexes(t testing.TB, ic indexcatalog.Catalog, tbl *table.Table, defs ...string) {
	t.Helper()
	for _, d := range defs {
		def, err := indexdef.Parse([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), tbl.Location()+"/indexes/"+def.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ic.Create(context.Background(), tbl.Identifier(), def.Name, md); err != nil {
			t.Fatal(err)
		}
	}
}
