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
	"github.com/streamidx/streamidx/internal/extsort"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/updater"
)

func init() {
	register(command{name: "build", summary: "build one index snapshot from every live row of a table snapshot", run: runBuild})
}

func runBuild(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "source table snapshot `id` (default: current)")
	if err := f.parse(fs, args); err != nil {
		return exitError, err
	}
	t, err := f.open(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer t.Close()
	if t.unsupported != nil {
		return exitError, t.unsupported
	}
	snap, err := lineage.Snapshot(t.tbl, f.snapshot)
	if err != nil {
		return exitError, err
	}
	limitMemory(int64(t.cfg.Build.MemoryBudget))
	extsort.RemoveStaleSpills(t.cfg.Build.SpillDir, t.log)
	start := time.Now()
	progress := newProgressLine(g.stderr, t.cfg.Build.Progress)
	defer progress.finish()
	// An explicit build adds its snapshot on top of whatever is current.
	res, err := updater.BuildAndPublish(ctx, t.indexes, t.tbl, f.index, t.md, snap, updater.BuildOptions{
		Build: compactor.BuildOptions{
			RangeWriterOptions: compactor.ConfiguredRangeWriter(t.cfg.Build, t.store),
			MemoryBudget:       int64(t.cfg.Build.MemoryBudget),
			SpillDir:           t.cfg.Build.SpillDir,
			Logger:             t.log,
			Progress:           progress.build,
		},
	})
	if err != nil {
		return exitError, fmt.Errorf("build index %s: %w", f.index, err)
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "built index %s on %s: snapshot %d for source snapshot %d\n", f.index, f.table, res.Snapshot.SnapshotID, snap.SnapshotID)
	fmt.Fprintf(stdout, "%d entries in %d range files (%s) in %s (%.0f rows/s)\nmetadata: %s\n",
		res.Rows, len(res.Entries), humanBytes(res.Bytes), el.Round(time.Millisecond), float64(res.Rows)/el.Seconds(), res.MetadataLocation)
	return exitOK, nil
}

// limitMemory makes the Go runtime collect garbage before the memory it
// manages grows past a command's budget (a build's sort buffer plus Parquet
// row groups and Arrow batches in flight; verify's two sorts; a daemon's
// updates and its lookup cache) by more than an eighth (at least 64 MiB),
// unless the user set GOMEMLIMIT. The budget is what the process may use,
// not only its sort: without the limit the collector lets the heap grow to
// twice what is live. The eighth left of a quarter is for what the runtime
// does not count: the program's own pages, memory freed and not yet
// returned to the system.
func limitMemory(budget int64) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(budget + max(budget/8, 64<<20))
	}
}
