package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/streamidx/streamidx/internal/verify"
)

func init() {
	register(command{name: "verify", summary: "check an index snapshot against a full scan of its source snapshot (exit 0 exact, 1 different, 2 error)", run: runVerify})
}

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
	snap, err := findIndexSnapshot(t.md, f.snapshot)
	if err != nil {
		return exitError, fmt.Errorf("index %s: %w", f.index, err)
	}
	rep, err := verify.Verify(ctx, t.tbl, t.md, snap, verify.Options{
		Store: t.store, MemoryBudget: int64(t.cfg.Build.MemoryBudget) / 2, SpillDir: t.cfg.Build.SpillDir, Logger: t.log,
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
