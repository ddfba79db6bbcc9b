package updater

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
)

// BuildOptions tune BuildAndPublish.
type BuildOptions struct {
	// Build tunes the full build: range files, memory budget, spill
	// directory, logger, progress. Defaults: compactor's.
	Build compactor.BuildOptions
	// Properties are recorded in the index snapshot. Default: none.
	Properties map[string]string
	// RequireBase makes the commit conditional on BaseSnapshotID still being
	// the index's current snapshot (0: none yet), as an updater needs so
	// that two updaters do not both publish a build; without it the snapshot
	// is added on top of whatever is current, as an explicit rebuild wants.
	// Default: false.
	RequireBase    bool
	BaseSnapshotID int64
	// OnRetry is called each time the compare-and-swap lost to another
	// writer and is tried again on top of it. Default: none.
	OnRetry func()
}

// BuildResult is what BuildAndPublish wrote and committed.
type BuildResult struct {
	*compactor.BuildResult
	// Snapshot is the committed index snapshot, MetadataLocation the
	// metadata file that holds it.
	Snapshot         *format.Snapshot
	MetadataLocation string
}

// BuildAndPublish indexes every live row of source snapshot snap of tbl and
// commits the result as a new snapshot of index (whose metadata is md). On
// failure the range files it wrote are removed and the index is unchanged.
// It is the one full build path: the updater's first build and fallback, and
// `streamidx build`.
func BuildAndPublish(ctx context.Context, indexes indexcatalog.Catalog, tbl *table.Table, index string, md *format.Metadata,
	snap *table.Snapshot, opts BuildOptions) (BuildResult, error) {
	res, err := compactor.FullBuild(ctx, tbl, snap, md, objstore.Join(md.Location, "data"), opts.Build)
	if err != nil {
		return BuildResult{}, fmt.Errorf("full build for source snapshot %d: %w", snap.SnapshotID, err)
	}
	out := BuildResult{BuildResult: res}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, snap))
	if err != nil {
		compactor.RemoveFiles(ctx, opts.Build.Store, opts.Build.Logger, res.Entries)
		return out, err
	}
	out.Snapshot, out.MetadataLocation, err = flush.Publish(ctx, indexes, flush.Publication{
		Table: tbl.Identifier(), Index: index, IndexUUID: md.IndexUUID, Schema: is, Entries: res.Entries,
		SourceSnapshotID: snap.SnapshotID, Properties: opts.Properties, RequireBase: opts.RequireBase, BaseSnapshotID: opts.BaseSnapshotID,
	}, flush.Options{Store: opts.Build.Store, Logger: opts.Build.Logger, OnRetry: opts.OnRetry})
	if err != nil {
		compactor.RemoveFiles(ctx, opts.Build.Store, opts.Build.Logger, res.Entries)
		return out, err
	}
	return out, nil
}
