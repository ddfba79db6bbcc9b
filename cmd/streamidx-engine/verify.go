package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/streamidx/streamidx/internal/indexinfo"
	"github.com/streamidx/streamidx/internal/verify"
)

func init() {
	register(command{name: "verify", summary: "check an index snapshot against a full scan of its source snapshot (exit 0 exact, 1 different, 2 error)", run: runVerify})
}

// Exit codes of verify, one rule for every file: 1 (DIFFERENT) when the
// index holds other entries than the table's live rows or when any of its
// files (tracking or range) is not what the index says it is: corrupt,
// truncated, swapped for another or missing; the report names the file. 2
// when verify cannot judge: bad flags, a table or index metadata that
// cannot be loaded, a storage failure other than a missing file (retry),
// or files streamidx cannot read (encrypted, not Parquet).

func runVerify(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "source table snapshot `id` (or index snapshot id) to verify (default: the current index snapshot)")
	if err := f.parse(fs, args); err != nil {
		return exitError, err
	}
	t, err := f.open(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer t.Close()
	if t.unsupported != nil {
		return exitError, fmt.Errorf("index %s: %w: nothing to verify", f.index, t.unsupported)
	}
	snap, err := indexinfo.FindSnapshot(t.md, f.snapshot)
	if err != nil {
		return exitError, fmt.Errorf("index %s: %w", f.index, err)
	}
	// The two sorts get an eighth of the build's budget each: the table
	// scan beside them takes the rest, and more at times than its steady
	// share (iceberg-go merges the equality delete sets of each data file
	// into a new set, on several files at once: at 10M rows with 50 upsert
	// commits, up to 1M keys each), which the limit cannot hold back.
	limitMemory(int64(t.cfg.Build.MemoryBudget))
	rep, err := verify.Verify(ctx, t.tbl, t.md, snap, verify.Options{
		Store: t.store, MemoryBudget: int64(t.cfg.Build.MemoryBudget) / 8, SpillDir: t.cfg.Build.SpillDir, Logger: t.log,
	})
	if err != nil {
		return exitError, fmt.Errorf("verify index %s: %w", f.index, err)
	}
	fmt.Fprint(stdout, rep.Summary())
	if !rep.Exact() {
		return exitDifferent, nil
	}
	return exitOK, nil
}
