package tablemeta

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// ErrNotInCatalog is returned (wrapped) by SQLLocation for a table the
// catalog has no row of.
var ErrNotInCatalog = errors.New("no such table in the catalog")

// SQLCatalog reads where the tables of an Iceberg SQL catalog (the layout
// of the JDBC catalog, which iceberg-go's SQL catalog shares: a row per
// table in iceberg_tables naming its metadata file) keep their current
// metadata, with one indexed query.
type SQLCatalog struct {
	db    *sql.DB
	query string
	name  string
}

// NewSQLCatalog reads catalog name in db; postgres selects PostgreSQL's
// placeholders (SQLite's otherwise).
func NewSQLCatalog(db *sql.DB, postgres bool, name string) *SQLCatalog {
	q := "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?"
	if postgres {
		q = "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3"
	}
	return &SQLCatalog{db: db, query: q, name: name}
}

// MetadataLocation returns the metadata file the catalog names for table
// ident (namespace first, then the table's name).
func (c *SQLCatalog) MetadataLocation(ctx context.Context, ident []string) (string, error) {
	if len(ident) < 2 {
		return "", fmt.Errorf("table %s: a table name needs a namespace", strings.Join(ident, "."))
	}
	var loc sql.NullString
	err := c.db.QueryRowContext(ctx, c.query, c.name, strings.Join(ident[:len(ident)-1], "."), ident[len(ident)-1]).Scan(&loc)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !loc.Valid {
		return "", fmt.Errorf("table %s: %w", strings.Join(ident, "."), ErrNotInCatalog)
	}
	if err != nil {
		return "", fmt.Errorf("table %s: read the catalog: %w", strings.Join(ident, "."), err)
	}
	return loc.String, nil
}
