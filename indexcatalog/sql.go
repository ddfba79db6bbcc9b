package indexcatalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// Dialect names the SQL database behind a SQLCatalog. The values are those
// of iceberg-go's SQL catalog (sql.SupportedDialect), so one setting serves
// both.
type Dialect string

// Supported dialects.
const (
	DialectSQLite   Dialect = "sqlite"
	DialectPostgres Dialect = "postgres"
)

// DefaultCatalogName is the catalog name that iceberg-go, pyiceberg and
// Java's JDBC catalog use when none is configured.
const DefaultCatalogName = "default"

// indexesDDL creates the catalog table. It follows the Iceberg JDBC
// catalog's iceberg_tables (catalog_name first, locations up to 1000
// characters) so that it sits naturally in the same database.
const indexesDDL = `CREATE TABLE IF NOT EXISTS streamidx_indexes (
	catalog_name VARCHAR(255) NOT NULL,
	table_namespace VARCHAR(255) NOT NULL,
	table_name VARCHAR(255) NOT NULL,
	index_name VARCHAR(255) NOT NULL,
	metadata_location VARCHAR(1000) NOT NULL,
	previous_metadata_location VARCHAR(1000),
	PRIMARY KEY (catalog_name, table_namespace, table_name, index_name)
)`

const keyWhere = `catalog_name = ? AND table_namespace = ? AND table_name = ? AND index_name = ?`

// SQLCatalog is the index catalog in a SQL database: one row of
// streamidx_indexes per index. It is safe for concurrent use, also by other
// processes on the same database.
type SQLCatalog struct {
	db      *sql.DB
	dialect Dialect
	name    string
	store   *objstore.Store
	logger  *slog.Logger
	closed  atomic.Bool
}

// NewSQL opens the index catalog in db, creating streamidx_indexes if it is
// missing. catalogName separates catalogs that share a database, as in
// iceberg-go's SQL catalog; empty means DefaultCatalogName. The caller owns
// db: Close does not close it. For SQLite, open db with OpenSQLite or with
// the same settings, so that concurrent writers wait for each other instead
// of failing with "database is locked".
func NewSQL(ctx context.Context, db *sql.DB, dialect Dialect, catalogName string, opts ...Option) (*SQLCatalog, error) {
	if dialect != DialectSQLite && dialect != DialectPostgres {
		return nil, fmt.Errorf("open index catalog: dialect %q not supported (want %q or %q)", dialect, DialectSQLite, DialectPostgres)
	}
	if catalogName == "" {
		catalogName = DefaultCatalogName
	}
	o := buildOptions(opts)
	c := &SQLCatalog{db: db, dialect: dialect, name: catalogName, store: o.store, logger: o.logger}
	if _, err := db.ExecContext(ctx, indexesDDL); err != nil {
		// Two processes creating the table at once can collide on Postgres;
		// the table then exists, which is all that is needed.
		if _, probe := db.ExecContext(ctx, "SELECT 1 FROM streamidx_indexes WHERE 1 = 0"); probe != nil {
			return nil, fmt.Errorf("open index catalog: create table streamidx_indexes: %w", err)
		}
	}
	return c, nil
}

// OpenSQLite opens a SQLite database file for the index catalog and the
// Iceberg SQL catalog alike. Every connection waits up to 30s for a lock
// instead of failing, the database is in WAL mode so readers never block
// the writer, and commits are fsynced (synchronous=FULL), because a commit
// acknowledged here is followed by committing Kafka offsets. These settings
// make concurrent writers safe in one process and across processes on one
// host; SQLite over a network file system is not.
func OpenSQLite(path string) (*sql.DB, error) {
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	dsn := "file:" + escaped + "?_busy_timeout=30000&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate"
	db, err := sql.Open(sqliteshim.ShimName, dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite database %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite database %s: %w", path, err)
	}
	return db, nil
}

// Create implements Catalog. md.Location must be set: the SQL catalog does
// not choose where an index lives.
func (c *SQLCatalog) Create(ctx context.Context, table []string, name string, md *format.Metadata) (string, error) {
	id, err := c.begin(table, name)
	if err != nil {
		return "", err
	}
	if md.Location == "" {
		return "", fmt.Errorf("create index %s: metadata has no location", id)
	}
	if _, found, err := c.current(ctx, id); err != nil {
		return "", fmt.Errorf("create index %s: %w", id, err)
	} else if found {
		return "", fmt.Errorf("create index %s: %w", id, ErrIndexExists)
	}
	p, err := prepareCreate(md, time.Now())
	if err != nil {
		return "", fmt.Errorf("create index %s: %w", id, err)
	}
	loc := sqlMetadataLocation(p.md.Location, 0)
	if err := c.store.Publish(ctx, loc, p.data, objstore.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create index %s: %w", id, err)
	}
	res, err := c.exec(ctx, `INSERT INTO streamidx_indexes
		(catalog_name, table_namespace, table_name, index_name, metadata_location, previous_metadata_location)
		VALUES (?, ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING`,
		c.name, namespaceKey(id.namespace), id.table, id.index, loc)
	if err == nil {
		err = wantOneRow(res, ErrIndexExists)
	}
	if err != nil {
		removeQuietly(ctx, c.store, c.logger, "index not created", loc)
		return "", fmt.Errorf("create index %s: %w", id, err)
	}
	p.apply(md)
	return loc, nil
}

// Load implements Catalog.
func (c *SQLCatalog) Load(ctx context.Context, table []string, name string) (*format.Metadata, string, error) {
	id, err := c.begin(table, name)
	if err != nil {
		return nil, "", err
	}
	// A current file can vanish between reading the row and reading the file
	// only if enough commits trimmed and deleted it meanwhile; the row has
	// then moved on, so read it again.
	for attempt := 0; ; attempt++ {
		loc, found, err := c.current(ctx, id)
		if err != nil {
			return nil, "", fmt.Errorf("load index %s: %w", id, err)
		}
		if !found {
			return nil, "", fmt.Errorf("load index %s: %w", id, ErrIndexNotFound)
		}
		md, err := readMetadata(ctx, c.store, loc)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			if now, _, cerr := c.current(ctx, id); cerr == nil && now != loc {
				continue
			}
		}
		if err != nil {
			if errors.Is(err, format.ErrUnsupportedIndexType) {
				return md, loc, fmt.Errorf("load index %s: %w", id, err)
			}
			return nil, "", fmt.Errorf("load index %s: %w", id, err)
		}
		return md, loc, nil
	}
}

// Commit implements Catalog. The new metadata file goes to
// <md.Location>/metadata/<version>-<uuid>.metadata.json, the version being
// one more than base's.
func (c *SQLCatalog) Commit(ctx context.Context, table []string, name, base string, md *format.Metadata) (string, error) {
	id, err := c.begin(table, name)
	if err != nil {
		return "", err
	}
	if md.Location == "" {
		return "", fmt.Errorf("commit index %s: metadata has no location", id)
	}
	if err := c.checkBase(ctx, id, base); err != nil {
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	baseMd, err := readMetadata(ctx, c.store, base)
	if errors.Is(err, fs.ErrNotExist) {
		// Deleted after trimming by later commits: base is stale.
		if cerr := c.checkBase(ctx, id, base); cerr != nil {
			return "", fmt.Errorf("commit index %s: %w", id, cerr)
		}
	}
	// A corrupt base can only be named by a rollback (Load refuses it),
	// which replaces it: the swap still requires it to be current.
	if err != nil && !errors.Is(err, format.ErrUnsupportedIndexType) && !format.IsCorruption(err) {
		return "", fmt.Errorf("commit index %s: read base: %w", id, err)
	}
	p, err := prepareCommit(md, base, baseMd, time.Now())
	if err != nil {
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	loc := sqlMetadataLocation(p.md.Location, nextSQLVersion(base, len(p.md.MetadataLog)))
	if err := c.store.Publish(ctx, loc, p.data, objstore.CreateOptions{}); err != nil {
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	res, err := c.exec(ctx, `UPDATE streamidx_indexes SET metadata_location = ?, previous_metadata_location = ?
		WHERE `+keyWhere+` AND metadata_location = ?`,
		loc, base, c.name, namespaceKey(id.namespace), id.table, id.index, base)
	if err == nil {
		err = wantOneRow(res, ErrCommitConflict)
	}
	if err != nil {
		removeQuietly(ctx, c.store, c.logger, "commit rejected", loc)
		if errors.Is(err, ErrCommitConflict) {
			if _, found, cerr := c.current(ctx, id); cerr == nil && !found {
				err = ErrIndexNotFound
			}
		}
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	if deleteTrimmed(p.md.Properties) {
		removeQuietly(ctx, c.store, c.logger, "trimmed from metadata log", p.trimmed...)
	}
	p.apply(md)
	return loc, nil
}

// List implements Catalog.
func (c *SQLCatalog) List(ctx context.Context, table []string) ([]string, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := checkTable(table); err != nil {
		return nil, err
	}
	ns, tbl := table[:len(table)-1], table[len(table)-1]
	rows, err := c.query(ctx, `SELECT index_name FROM streamidx_indexes
		WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?`, c.name, namespaceKey(ns), tbl)
	if err != nil {
		return nil, fmt.Errorf("list indexes of %q: %w", table, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list indexes of %q: %w", table, err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list indexes of %q: %w", table, err)
	}
	slices.Sort(names)
	return names, nil
}

// Drop implements Catalog. The metadata and data files stay where they are.
func (c *SQLCatalog) Drop(ctx context.Context, table []string, name string) error {
	id, err := c.begin(table, name)
	if err != nil {
		return err
	}
	res, err := c.exec(ctx, `DELETE FROM streamidx_indexes WHERE `+keyWhere,
		c.name, namespaceKey(id.namespace), id.table, id.index)
	if err == nil {
		err = wantOneRow(res, ErrIndexNotFound)
	}
	if err != nil {
		return fmt.Errorf("drop index %s: %w", id, err)
	}
	return nil
}

// Close implements Catalog. It does not close the database.
func (c *SQLCatalog) Close() error {
	c.closed.Store(true)
	return nil
}

func (c *SQLCatalog) begin(table []string, name string) (ident, error) {
	if c.closed.Load() {
		return ident{}, ErrClosed
	}
	return newIdent(table, name)
}

// checkBase fails with ErrCommitConflict unless base is the current
// location, so a stale writer learns it before writing a file.
func (c *SQLCatalog) checkBase(ctx context.Context, id ident, base string) error {
	cur, found, err := c.current(ctx, id)
	switch {
	case err != nil:
		return err
	case !found:
		return ErrIndexNotFound
	case cur != base:
		return fmt.Errorf("%w: base %s, current %s", ErrCommitConflict, base, cur)
	}
	return nil
}

func (c *SQLCatalog) current(ctx context.Context, id ident) (string, bool, error) {
	var loc string
	err := c.db.QueryRowContext(ctx, c.rebind(`SELECT metadata_location FROM streamidx_indexes WHERE `+keyWhere),
		c.name, namespaceKey(id.namespace), id.table, id.index).Scan(&loc)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read streamidx_indexes: %w", err)
	}
	return loc, true, nil
}

func (c *SQLCatalog) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := c.db.ExecContext(ctx, c.rebind(query), args...)
	if err != nil {
		return nil, fmt.Errorf("write streamidx_indexes: %w", err)
	}
	return res, nil
}

func (c *SQLCatalog) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.rebind(query), args...)
}

// rebind turns the ? placeholders of a query into Postgres's $1, $2, ...
// The queries here hold no ? inside string literals.
func (c *SQLCatalog) rebind(query string) string {
	if c.dialect != DialectPostgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// wantOneRow turns a statement that changed no row into the condition that
// explains it.
func wantOneRow(res sql.Result, none error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("write streamidx_indexes: %w", err)
	}
	if n != 1 {
		return none
	}
	return nil
}

// sqlMetadataLocation names a metadata file as Iceberg names table metadata
// files: a zero-padded version for people, a UUID for uniqueness.
func sqlMetadataLocation(indexLocation string, version int) string {
	return objstore.Join(indexLocation, "metadata", fmt.Sprintf("%05d-%s.metadata.json", version, uuid.NewString()))
}

// nextSQLVersion is one more than the version in base's file name. A base
// written by another tool may carry none; the length of the metadata log is
// then the best guess, and the UUID keeps the name unique either way.
func nextSQLVersion(base string, logLen int) int {
	name := objstore.Base(base)
	if i := strings.IndexByte(name, '-'); i > 0 {
		if v, err := strconv.Atoi(name[:i]); err == nil && v >= 0 {
			return v + 1
		}
	}
	return logLen
}

// encodedNamespacePrefix marks a namespace stored as a JSON list, the form
// iceberg-go's SQL catalog uses when the levels cannot be joined with dots.
const encodedNamespacePrefix = "__iceberg_namespace_v1__:"

// namespaceKey stores a namespace in table_namespace the way iceberg-go's
// SQL catalog stores it in iceberg_tables, so one table has one spelling in
// both: the levels joined with dots, unless a level holds a dot itself (or
// the joined text could pass for the encoded form), in which case the JSON
// list of levels behind encodedNamespacePrefix.
func namespaceKey(ns []string) string {
	joined := strings.Join(ns, ".")
	dotted := slices.ContainsFunc(ns, func(level string) bool { return strings.Contains(level, ".") })
	if !dotted && !strings.Contains(joined, encodedNamespacePrefix) {
		return joined
	}
	data, err := json.Marshal(ns)
	if err != nil {
		panic(fmt.Sprintf("indexcatalog: encode namespace %q: %v", ns, err))
	}
	return encodedNamespacePrefix + string(data)
}

// Open opens the index catalog that the configuration key
// catalog.index-catalog names: "sql" in db, the SQL catalog's database
// (postgres selects PostgreSQL's dialect, SQLite's otherwise), under
// catalog name; "fs" under root (catalog.index-location, else the
// warehouse).
func Open(ctx context.Context, kind string, db *sql.DB, postgres bool, name, root string, opts ...Option) (Catalog, error) {
	switch kind {
	case "sql":
		dialect := DialectSQLite
		if postgres {
			dialect = DialectPostgres
		}
		c, err := NewSQL(ctx, db, dialect, name, opts...)
		if err != nil {
			return nil, err
		}
		return c, nil
	case "fs":
		c, err := NewFS(root, opts...)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("open index catalog: %q is neither sql nor fs", kind)
}
