package reconcile

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/tablemeta"
	"github.com/streamidx/streamidx/internal/tablescan"
	"github.com/streamidx/streamidx/planner/source"
)

// Table is the source.Table of tbl. A caller that answers many lookups
// for one table keeps it: its view of the metadata is made once.
func Table(tbl *table.Table) source.Table { return &icebergTable{tbl: tbl} }

type icebergTable struct {
	tbl  *table.Table
	once sync.Once
	view *tablemeta.View
}

func (t *icebergTable) View() *tablemeta.View {
	t.once.Do(func() { t.view = lineage.View(t.tbl) })
	return t.view
}

// Reconcile returns the reconciler of req: from the store's lookup cache
// when it keeps one, so that the lookups of a lagging index do not each
// read the manifests and delete files of the commits since.
func (t *icebergTable) Reconcile(ctx context.Context, req source.Request) (source.Reconciler, error) {
	var from *table.Snapshot
	if req.From != 0 {
		if from = t.tbl.SnapshotByID(req.From); from == nil {
			return nil, fmt.Errorf("table %s has no snapshot %d", t.View().Name(), req.From)
		}
	}
	to := t.tbl.SnapshotByID(req.To)
	if to == nil {
		return nil, fmt.Errorf("table %s has no snapshot %d", t.View().Name(), req.To)
	}
	if req.Store == nil || !req.Store.LookupCaching() || from == nil {
		rc, err := newReconciler(ctx, t.tbl, from, to, req.Schema, req.IndexSchema, req.Allocator)
		if err != nil {
			return nil, err
		}
		return rc, nil
	}
	key := fmt.Sprintf("reconcile/%s/%s/%d/%d/%s", req.Index.IndexUUID, t.tbl.Metadata().TableUUID(), req.From, req.To, req.Columns.Layout)
	rc, err := objstore.Cached(ctx, req.Store, req.Index.Location, key, func(ctx context.Context) (*reconciler, int64, error) {
		rc, err := newReconciler(ctx, t.tbl, from, to, req.Schema, req.IndexSchema, memory.DefaultAllocator)
		if err != nil {
			return nil, 0, err
		}
		// The equality delete files of one table snapshot are mostly those
		// of the one before: their content is cached by file, not read
		// again for every table snapshot a lookup meets.
		rc.shareEqualityDeletes(func(ctx context.Context, del iceberg.DataFile, schema *iceberg.Schema,
			read func(context.Context) (*tablescan.EqualityDeletes, error)) (*tablescan.EqualityDeletes, error) {
			return objstore.Cached(ctx, req.Store, del.FilePath(), fmt.Sprintf("equality/%d/%d", schema.ID, schemaFingerprint(schema)), func(ctx context.Context) (*tablescan.EqualityDeletes, int64, error) {
				set, err := read(ctx)
				if err != nil {
					return nil, 0, err
				}
				return set, set.Bytes(), nil
			})
		})
		rc.shared = true
		return rc, rc.size(), nil
	})
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// schemaFingerprint tells schemas with one ID apart: tables do not share
// schema IDs, and a cached delete file belongs to one table.
func schemaFingerprint(s *iceberg.Schema) uint64 {
	h := fnv.New64a()
	for _, f := range s.Fields() {
		fmt.Fprintf(h, "%d:%s;", f.ID, f.Type)
	}
	return h.Sum64()
}
