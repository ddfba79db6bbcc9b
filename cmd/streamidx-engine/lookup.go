package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/streamidx/streamidx/internal/predicatearg"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
)

func init() {
	register(command{name: "lookup", summary: "find the entries matching a predicate through an index, exact for a table snapshot", run: runLookup})
}

func runLookup(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "table snapshot `id` the answer is exact for (default: current)")
	whereArg := fs.String("where", "", "predicate, e.g. \"customer_id = 42\" or \"ts >= '2026-11-01T00:00:00Z' AND ts < '2026-11-02T00:00:00Z'\"; - reads it from standard input")
	whereFile := fs.String("where-file", "", "read the predicate from `file` (for predicates longer than a command line holds)")
	asJSON := fs.Bool("json", false, "print one JSON object per row (stable; see README)")
	explain := fs.Bool("explain", false, "print the plan and what was read after the rows")
	limit := fs.Int64("limit", 0, "stop after `N` rows (default: no limit)")
	if err := f.parse(fs, args); err != nil {
		return exitError, err
	}
	if *limit < 0 {
		return exitError, fmt.Errorf("--limit %d: must not be negative", *limit)
	}
	where, err := predicatearg.Read(*whereArg, *whereFile, stdin)
	if err != nil {
		return exitError, err
	}
	if _, err := planner.Parse(where); err != nil {
		return exitError, err
	}
	t, err := f.open(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer t.Close()
	// An index of a type streamidx does not implement goes to the planner
	// too, which ignores it and scans the table.
	p := planner.New(planner.Options{Store: t.store})
	res, err := p.Lookup(ctx, reconcile.Table(t.tbl), t.md, planner.Query{Where: where, TableSnapshotID: f.snapshot, Limit: *limit})
	if errors.Is(err, planner.ErrNoIndexSnapshot) {
		return exitError, fmt.Errorf("index %s: %w: run streamidx build", f.index, err)
	}
	if err != nil {
		return exitError, fmt.Errorf("index %s: %w", f.index, err)
	}
	defer res.Release()
	if *asJSON {
		err = res.WriteJSONLines(stdout, *explain)
	} else {
		err = res.WriteTable(stdout, *explain)
	}
	if err != nil {
		return exitError, err
	}
	return exitOK, nil
}

// stdin is where `--where -` reads the predicate; tests replace it.
var stdin io.Reader = os.Stdin
