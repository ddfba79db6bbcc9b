// Package tablecache keeps the tables an iceberg-go SQL catalog loads while
// the catalog's row still names the same metadata file.
//
// iceberg-go's LoadTable reads and parses the table's whole metadata file
// at every call. A daemon polls its tables several times a second, and the
// metadata of a table that commits every second carries every snapshot it
// has not expired yet (hundreds of kilobytes within hours), so parsing it
// again and again was a large share of the daemon's work between commits.
// A metadata file never changes once written, so a table loaded from one
// is as good as new while the catalog still points at it: one indexed
// query of the catalog's row tells.
//
// Concurrency: a Catalog is safe for concurrent use. The tables it hands
// out are shared; iceberg-go's tables are not changed by reading them, and
// a commit returns a new table.
package tablecache

import (
	"context"
	"database/sql"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/singleflight"

	"github.com/streamidx/streamidx/internal/tablemeta"
)

// Catalog is a catalog.Catalog whose LoadTable returns the table it loaded
// last while the catalog's row names the same metadata file.
type Catalog struct {
	catalog.Catalog
	rows *tablemeta.SQLCatalog

	mu   sync.Mutex
	kept map[string]*table.Table // by namespace and name
	// loading makes the callers that meet one new metadata file together
	// (a daemon's update and its lookup service, at each commit) parse it
	// once: by namespace, name and metadata location.
	loading singleflight.Group
}

// maxKept bounds the tables kept; past it, the kept tables are forgotten.
const maxKept = 256

// New wraps inner, an iceberg-go SQL catalog named name on db; postgres
// selects PostgreSQL's placeholders (SQLite's otherwise).
func New(inner catalog.Catalog, db *sql.DB, postgres bool, name string) *Catalog {
	return &Catalog{Catalog: inner, rows: tablemeta.NewSQLCatalog(db, postgres, name), kept: map[string]*table.Table{}}
}

// LoadTable returns table id: the one loaded last when the catalog's row
// still names its metadata file, else what the wrapped catalog loads. When
// the row cannot be read, the wrapped catalog answers (and says why, if
// the table is gone).
func (c *Catalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	if len(id) < 2 {
		return c.Catalog.LoadTable(ctx, id)
	}
	key := strings.Join(id[:len(id)-1], ".") + "\x00" + id[len(id)-1]
	loc, err := c.rows.MetadataLocation(ctx, id)
	if err != nil {
		return c.load(ctx, id, key)
	}
	c.mu.Lock()
	t := c.kept[key]
	c.mu.Unlock()
	if t != nil && t.MetadataLocation() == loc {
		return t, nil
	}
	// The load serves every caller waiting for it: a caller that gives up
	// must not fail the others with its "context canceled".
	v, err, _ := c.loading.Do(key+"\x00"+loc, func() (any, error) { return c.load(context.WithoutCancel(ctx), id, key) })
	if err != nil {
		return nil, err
	}
	return v.(*table.Table), nil
}

// load loads table id through the wrapped catalog and keeps it under key.
func (c *Catalog) load(ctx context.Context, id table.Identifier, key string) (*table.Table, error) {
	t, err := c.Catalog.LoadTable(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.kept, key)
		return nil, err
	}
	if len(c.kept) >= maxKept {
		clear(c.kept)
	}
	c.kept[key] = t
	return t, nil
}
