package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/verify"
)

func init() {
	register(command{name: "verify", summary: "check an index snapshot against a full scan of its source snapshot (exit 0 exact, 1 different, 2 error)", run: runVerify})
}

func runVerify(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "", "source table `NS.TABLE`")
	indexName := fs.String("index", "", "index `name`")
	snapshotID := fs.Int64("snapshot", 0, "source table snapshot `id` (or index snapshot id) to verify (default: the current index snapshot)")
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
	tbl, _, md, _, err := e.loadIndex(ctx, *tableName, *indexName)
	if errors.Is(err, format.ErrUnsupportedIndexType) {
		return exitError, fmt.Errorf("index %s: %w: nothing to verify", *indexName, err)
	}
	if err != nil {
		return exitError, err
	}
	snap, err := findIndexSnapshot(md, *snapshotID)
	if err != nil {
		return exitError, fmt.Errorf("index %s: %w", *indexName, err)
	}
	rep, err := verify.Verify(ctx, tbl, md, snap, verify.Options{
		Store: e.store, MemoryBudget: int64(e.cfg.Build.MemoryBudget) / 2, SpillDir: e.cfg.Build.SpillDir, Logger: e.log,
	})
	if err != nil {
		return exitError, fmt.Errorf("verify index %s: %w", *indexName, err)
	}
	fmt.Fprint(stdout, rep.Summary())
	if !rep.Exact() {
		return exitDifferent, nil
	}
	return exitOK, nil
}

// findIndexSnapshot picks the index snapshot for a source table snapshot id,
// or with that index snapshot id; 0 means the current one.
func findIndexSnapshot(md *format.Metadata, id int64) (*format.Snapshot, error) {
	if id == 0 {
		if s := md.CurrentSnapshot(); s != nil {
			return s, nil
		}
		return nil, errors.New("the index has no snapshot yet: run build")
	}
	if s := md.SnapshotsForSource(id); len(s) > 0 {
		return s[0], nil
	}
	if s := md.SnapshotByID(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("no index snapshot for source snapshot (or with id) %d", id)
}
