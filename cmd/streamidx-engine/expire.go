package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/streamidx/streamidx/flush"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
)

func init() {
	register(command{name: "expire", summary: "expire old index snapshots and delete the files no remaining snapshot references", run: runExpire})
}

// runExpire is the expiry the daemon runs after its commits, for indexes
// that no daemon keeps (built by `build` from a scheduler, say): the
// snapshots beyond --retain-last or older than --max-age leave the index
// metadata in one compare-and-swap commit, then the range and tracking
// files that no remaining snapshot references, and that are older than
// --grace, are deleted (orphans that crashed writers left included).
func runExpire(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "")
	retain := fs.Int("retain-last", 0, "keep the newest `N` index snapshots (default from run.retain-snapshots: 10)")
	maxAge := fs.Duration("max-age", 0, "also expire snapshots older than this `duration` (default from run.max-snapshot-age; 0: no age limit)")
	grace := fs.Duration("grace", time.Hour, "keep unreferenced files younger than this `duration`, and snapshots superseded since: a writer may still be building on them")
	dryRun := fs.Bool("dry-run", false, "print what would expire and be deleted, and change nothing")
	if err := f.parse(fs, args); err != nil {
		return exitError, err
	}
	if *grace <= 0 {
		return exitError, fmt.Errorf("--grace %s: want a positive duration", *grace)
	}
	e, id, err := f.openCatalogs(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	tbl, _, err := e.loadTable(ctx, f.table)
	if err != nil {
		return exitError, err
	}
	opts := flush.ExpireOptions{RetainLast: e.cfg.Run.RetainSnapshots, MaxAge: time.Duration(e.cfg.Run.MaxSnapshotAge), OrphanGrace: *grace,
		Store: e.store, Logger: e.log, DryRun: *dryRun}
	retainGiven := false
	fs.Visit(func(fl *flag.Flag) { retainGiven = retainGiven || fl.Name == "retain-last" })
	if retainGiven {
		if *retain < 1 {
			return exitError, fmt.Errorf("--retain-last %d: want at least 1 (the current snapshot is always kept)", *retain)
		}
		opts.RetainLast = *retain
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "max-age" {
			opts.MaxAge = *maxAge
		}
	})
	if opts.MaxAge < 0 {
		return exitError, fmt.Errorf("--max-age %s: want 0 (no age limit) or a positive duration", opts.MaxAge)
	}
	res, err := flush.Expire(ctx, e.indexes, id, f.index, func(md *format.Metadata) (*format.IndexSchema, error) {
		if err := format.CheckTable(md, lineage.View(tbl)); err != nil {
			return nil, err
		}
		return format.NewIndexSchema(md, tbl.Schema())
	}, opts)
	if err != nil {
		return exitError, fmt.Errorf("expire index %s of %s: %w", f.index, f.table, err)
	}
	verb, deleted := "expired", "deleted"
	if *dryRun {
		verb, deleted = "would expire", "would delete"
		for _, f := range res.FilesDeleted {
			fmt.Fprintf(stdout, "%s %s\n", deleted, f)
		}
	}
	fmt.Fprintf(stdout, "%s %d index snapshots of %s on %s; %s %d files (%s)\n", verb, res.SnapshotsExpired, f.index, f.table,
		deleted, len(res.FilesDeleted), humanBytes(res.BytesFreed))
	return exitOK, nil
}
