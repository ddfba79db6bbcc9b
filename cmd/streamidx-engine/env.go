package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the rest catalog type with catalog.Load
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/lib/pq" // the postgres database/sql driver

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/tablecache"
)

// globals are the flags every command takes.
type globals struct {
	configPath  string
	catalogURI  string
	catalogName string
	warehouse   string
	logLevel    string
	stderr      io.Writer
	// sqlitePath is the SQLite catalog database, once a command opened it,
	// for messages about it.
	sqlitePath string
	// serving: the command answers lookups, so the store keeps range file
	// footers and what lookups read within serve.cache-bytes.
	serving bool
}

// sqliteCoder is the error of the SQLite driver (modernc.org/sqlite):
// Code is SQLite's extended result code.
type sqliteCoder interface{ Code() int }

// SQLite result codes that mean the disk under the database is full:
// SQLITE_FULL (and its extended codes), and SQLITE_IOERR_SHMSIZE, which is
// how a full disk shows when the WAL index cannot grow.
const (
	sqliteFull         = 13
	sqliteIOErrShmSize = 10 | 19<<8
)

// explain names a full disk under the SQLite catalog as such: the driver
// says only "disk I/O error (4874)". Other errors are returned as they are.
func (g *globals) explain(err error) error {
	var c sqliteCoder
	if g.sqlitePath == "" || !errors.As(err, &c) || (c.Code()&0xff != sqliteFull && c.Code() != sqliteIOErrShmSize) {
		return err
	}
	return fmt.Errorf("the disk of the catalog database %s is full: free space there and retry (%w)", g.sqlitePath, err)
}

// register adds the global flags to fs. Their defaults are the values g
// already holds, so flags given before the command survive the command's
// own flag set and flags after it override them.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.configPath, "config", g.configPath, "YAML config `file` (see configs/streamidx.example.yaml)")
	fs.StringVar(&g.catalogURI, "catalog-uri", g.catalogURI, "Iceberg catalog `URI`: sqlite:///abs/path.db, postgres://..., http(s):// (REST)")
	fs.StringVar(&g.catalogName, "catalog-name", g.catalogName, "catalog `name` inside a shared SQL catalog database (default \"default\")")
	fs.StringVar(&g.warehouse, "warehouse", g.warehouse, "warehouse `URI` for new tables (default ./streamidx-data/warehouse)")
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "log `level`: debug, info, warn, error (default info)")
}

// config loads the file and the environment, then applies the flags.
func (g *globals) config() (config.Config, error) {
	return config.Resolve(g.configPath, map[string]string{
		"catalog.uri": g.catalogURI, "catalog.name": g.catalogName,
		"catalog.warehouse": g.warehouse, "log.level": g.logLevel,
	})
}

// env is what a command works with: the configuration, a logger, the Iceberg
// catalog, the index catalog and the store of index files.
type env struct {
	cfg     config.Config
	log     *slog.Logger
	db      *sql.DB // the SQL catalog database, when there is one
	cat     catalog.Catalog
	indexes indexcatalog.Catalog
	props   iceberg.Properties // catalog and IO properties
	store   *objstore.Store
	// sqlitePath is the SQLite catalog database; "" for other catalogs.
	sqlitePath string
}

func openEnv(ctx context.Context, g *globals) (*env, error) {
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, log: cfg.Log.Logger(g.stderr), props: cfg.IOProperties()}
	defer func() {
		if e.sqlitePath != "" {
			g.sqlitePath = e.sqlitePath
		}
	}()
	so := objstore.Options{IOProperties: e.props, Logger: e.log}
	if g.serving {
		// Footers are small: a sixteenth of the budget holds thousands;
		// decoded pages, page indexes and reconciliations take the rest.
		so.FooterCacheBytes = int64(cfg.Serve.CacheBytes) / 16
		so.LookupCacheBytes = int64(cfg.Serve.CacheBytes) - so.FooterCacheBytes
	}
	e.store = objstore.New(so)
	if err := e.openCatalog(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.openIndexCatalog(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *env) openCatalog(ctx context.Context) error {
	c := e.cfg.Catalog
	switch e.cfg.CatalogKind() {
	case "sqlite":
		path, err := e.cfg.SQLitePath()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("create catalog directory: %w", err)
		}
		if err := ensureLocalWarehouse(c.Warehouse); err != nil {
			return err
		}
		e.sqlitePath = path
		db, err := indexcatalog.OpenSQLite(path)
		if err != nil {
			return err
		}
		e.db = db
		return e.openSQLCatalog(sqlcat.SQLite)
	case "postgres":
		db, err := sql.Open("postgres", c.URI)
		if err != nil {
			return fmt.Errorf("open postgres catalog: %w", err)
		}
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return fmt.Errorf("open postgres catalog: %w", err)
		}
		e.db = db
		return e.openSQLCatalog(sqlcat.Postgres)
	case "rest":
		// Through the catalog's properties, as Iceberg's other clients are
		// configured: catalog.properties may carry the REST catalog's
		// authentication (token, credential, oauth2-server-uri, scope,
		// rest.sigv4-enabled, ...), which must be in place before the
		// first request.
		props := iceberg.Properties{"type": "rest", "uri": c.URI, "warehouse": c.Warehouse}
		for k, v := range e.props {
			if _, set := props[k]; !set {
				props[k] = v
			}
		}
		cat, err := catalog.Load(ctx, c.Name, props)
		if err != nil {
			return fmt.Errorf("open REST catalog %s: %w", c.URI, err)
		}
		e.cat = cat
		return nil
	}
	return fmt.Errorf("catalog uri %q: unsupported scheme", c.URI)
}

func (e *env) openSQLCatalog(dialect sqlcat.SupportedDialect) error {
	props := iceberg.Properties{"init_catalog_tables": "true"}
	for k, v := range e.props {
		props[k] = v
	}
	cat, err := sqlcat.NewCatalog(e.cfg.Catalog.Name, e.db, dialect, props)
	if err != nil {
		return fmt.Errorf("open SQL catalog %s: %w", e.cfg.Catalog.URI, err)
	}
	// Tables are parsed again only when their metadata file changes.
	e.cat = tablecache.New(cat, e.db, dialect == sqlcat.Postgres, e.cfg.Catalog.Name)
	return nil
}

// ensureLocalWarehouse creates a file:// warehouse directory so the embedded
// default works on a fresh machine.
func ensureLocalWarehouse(warehouse string) error {
	u, err := url.Parse(warehouse)
	if err != nil || (u.Scheme != "file" && u.Scheme != "") {
		return nil
	}
	if err := os.MkdirAll(u.Path, 0o755); err != nil {
		return fmt.Errorf("create warehouse %s: %w", warehouse, err)
	}
	return nil
}

func (e *env) openIndexCatalog(ctx context.Context) error {
	c, err := indexcatalog.Open(ctx, e.cfg.Catalog.IndexCatalog, e.db, e.cfg.CatalogKind() == "postgres", e.cfg.Catalog.Name,
		e.cfg.IndexRoot(), indexcatalog.WithStore(e.store), indexcatalog.WithLogger(e.log))
	if err != nil {
		return err
	}
	e.indexes = c
	return nil
}

// Close releases the catalogs and the database.
func (e *env) Close() {
	if e.indexes != nil {
		_ = e.indexes.Close()
	}
	if e.db != nil {
		_ = e.db.Close()
	}
}

func (e *env) loadTable(ctx context.Context, name string) (*table.Table, table.Identifier, error) {
	id, err := config.ParseTable(name)
	if err != nil {
		return nil, nil, err
	}
	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("load table %s: %w", name, err)
	}
	return tbl, id, nil
}

// loadIndex loads a table and one of its indexes, and refuses the pair
// unless format.CheckTable accepts it (an index of a dropped and re-created
// table is format.ErrTableReplaced). For an index of a type streamidx does
// not implement it returns the metadata together with an error wrapping
// format.ErrUnsupportedIndexType, so callers can still name it; the table
// is returned whenever it loaded.
func (e *env) loadIndex(ctx context.Context, tableName, index string) (*table.Table, table.Identifier, *format.Metadata, string, error) {
	tbl, id, err := e.loadTable(ctx, tableName)
	if err != nil {
		return nil, nil, nil, "", err
	}
	md, loc, err := e.indexes.Load(ctx, id, index)
	if md == nil {
		return tbl, id, nil, "", err
	}
	if cerr := format.CheckTable(md, lineage.View(tbl)); errors.Is(cerr, format.ErrTableReplaced) {
		return tbl, id, nil, "", fmt.Errorf("index %s of %s: %w (streamidx drop --table %s --index %s, then streamidx create)",
			index, tableName, cerr, tableName, index)
	} else if cerr != nil {
		return tbl, id, nil, "", fmt.Errorf("index %s of %s (%s): %w", index, tableName, loc, cerr)
	}
	return tbl, id, md, loc, err
}

// requireFlags reports the missing required flags of a command.
func requireFlags(fs *flag.FlagSet, names ...string) error {
	var missing []string
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil || f.Value.String() == "" {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// indexLocation is where a new index of tbl keeps its files: beside the
// table's data for the SQL index catalog, where the FS catalog says for it.
// It is a full URI (a table in a warehouse given as a plain path gets a
// file:// one), so every path written under it is absolute by the table
// spec's rules.
func (e *env) indexLocation(tbl *table.Table, id table.Identifier, name string) (string, error) {
	if fsc, ok := e.indexes.(*indexcatalog.FSCatalog); ok {
		return fsc.IndexLocation(id, name)
	}
	return format.LocationURI(strings.TrimRight(tbl.Location(), "/") + "/indexes/" + name)
}
