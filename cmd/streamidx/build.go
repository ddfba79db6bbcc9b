package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
)

func init() {
	register(command{name: "build", summary: "build one index snapshot from every live row of a table snapshot", run: runBuild})
}

func runBuild(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "", "source table `NS.TABLE`")
	indexName := fs.String("index", "", "index `name`")
	snapshotID := fs.Int64("snapshot", 0, "source table snapshot `id` (default: current)")
	if err := fs.Parse(args); err != nil {
		return exitError, err
	}
	if err := requireFlags(fs, "table", "index"); err != nil {
		return exitError, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	tbl, id, md, _, err := e.loadIndex(ctx, *tableName, *indexName)
	if err != nil {
		return exitError, err
	}
	snap, err := lineage.Snapshot(tbl, *snapshotID)
	if err != nil {
		return exitError, err
	}
	limitMemory(int64(e.cfg.Build.MemoryBudget))
	start := time.Now()
	progress := newProgressLine(g.stderr, e.cfg.Build.Progress)
	defer progress.finish()
	res, err := compactor.FullBuild(ctx, tbl, snap, md, objstore.Join(md.Location, "data"), compactor.BuildOptions{
		RangeWriterOptions: compactor.RangeWriterOptions{
			TargetFileSize: int64(e.cfg.Build.TargetFileSize),
			RowGroupRows:   e.cfg.Build.RowGroupRows,
			Store:          e.store,
		},
		MemoryBudget: int64(e.cfg.Build.MemoryBudget),
		SpillDir:     e.cfg.Build.SpillDir,
		Logger:       e.log,
		Progress:     progress.build,
	})
	if err != nil {
		return exitError, fmt.Errorf("build index %s: %w", *indexName, err)
	}
	is, err := format.NewIndexSchema(md, lineage.SnapshotSchema(tbl, snap))
	if err != nil {
		return exitError, err
	}
	sourceID := snap.SnapshotID
	s, metaLoc, err := flush.Publish(ctx, e.indexes, flush.Publication{
		Table: id, Index: *indexName, IndexUUID: md.IndexUUID, Schema: is,
		Entries: res.Entries, SourceSnapshotID: sourceID,
	}, flush.Options{Store: e.store, Logger: e.log})
	if err != nil {
		compactor.RemoveFiles(ctx, e.store, e.log, res.Entries)
		return exitError, err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "built index %s on %s: snapshot %d for source snapshot %d\n", *indexName, *tableName, s.SnapshotID, sourceID)
	fmt.Fprintf(stdout, "%d entries in %d range files (%s) in %s (%.0f rows/s)\nmetadata: %s\n",
		res.Rows, len(res.Entries), humanBytes(res.Bytes), el.Round(time.Millisecond), float64(res.Rows)/el.Seconds(), metaLoc)
	return exitOK, nil
}

// limitMemory makes the Go runtime collect garbage before the heap grows
// far past the build's budget (sort buffer plus Parquet row groups and Arrow
// batches in flight), unless the user set GOMEMLIMIT.
func limitMemory(budget int64) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(budget + 256<<20)
	}
}
