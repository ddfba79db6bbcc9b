package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/workload"
)

func init() {
	register(command{name: "gen-table", summary: "write a synthetic orders table (for measurements, the demo and trials)", run: runGenTable})
}

func runGenTable(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "demo.orders", "table `NS.TABLE` to create or append to")
	rowsN := fs.Int64("rows", 1_000_000, "number of orders")
	commits := fs.Int("commits", 1, "number of append commits the rows are spread over")
	start := fs.Int64("start", 0, "first order id")
	seed := fs.Uint64("seed", 1, "random seed")
	formatVersion := fs.Int("format-version", 2, "Iceberg format version of a new table")
	upsert := fs.Int64("upsert", 0, "instead of appending, commit one upsert (equality delete + new version) of `N` existing orders among the first --rows")
	pattern := fs.String("pattern", "uniform", "which orders --upsert changes: tail (the highest ids) or uniform")
	every := fs.Duration("every", 0, "with --upsert: commit an upsert every `interval`, a new version of the orders each time, until interrupted (or --commits are made)")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if *commits < 1 || *rowsN < 0 {
		return exitError, fmt.Errorf("want --rows >= 0 and --commits >= 1")
	}
	if *upsert < 0 {
		return exitError, fmt.Errorf("--upsert %d: want a positive number of orders to upsert (or 0 to append)", *upsert)
	}
	if *every < 0 || (*every > 0 && *upsert == 0) {
		return exitError, fmt.Errorf("--every %s: want a positive interval, with --upsert", *every)
	}
	if *upsert > 0 && *rowsN < 1 {
		return exitError, fmt.Errorf("--upsert %d picks existing orders among the first --rows, and --rows is %d: give the number of orders the table holds", *upsert, *rowsN)
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	id, err := config.ParseTable(*tableName)
	if err != nil {
		return exitError, err
	}
	tbl, err := workload.CreateOrders(ctx, e.cat, id, *formatVersion)
	if err != nil {
		return exitError, err
	}
	began := time.Now()
	if *every > 0 {
		streamCommits := 0 // until interrupted
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "commits" {
				streamCommits = *commits
			}
		})
		made, err := workload.Stream(ctx, tbl, workload.StreamOptions{Rows: *rowsN, Upserts: *upsert, Pattern: *pattern, Interval: *every,
			Commits: streamCommits, Seed: *seed,
			// Other writers (a daemon's rewrite-deletes, say) commit to the
			// table too: each commit starts from the table as it is, and one
			// that lost the race is made again on the newer table.
			Reload: func(ctx context.Context) (*table.Table, error) { return e.cat.LoadTable(ctx, id) },
			OnCommit: func(c workload.Commit) {
				fmt.Fprintf(stdout, "commit %d: upserted %d orders (%s) in %s: snapshot %d\n", c.N, c.Upserts, *pattern,
					c.Took.Round(time.Millisecond), c.SnapshotID)
			}})
		if err != nil {
			return exitError, err
		}
		fmt.Fprintf(stdout, "%d commits in %s\n", len(made), time.Since(began).Round(time.Millisecond))
		return exitOK, nil
	}
	if *upsert > 0 {
		ids, err := workload.UpsertIDs(*rowsN, *upsert, *pattern, *seed)
		if err != nil {
			return exitError, err
		}
		if tbl, err = workload.Upsert(ctx, tbl, ids, 1, *seed); err != nil {
			return exitError, err
		}
		fmt.Fprintf(stdout, "upserted %d orders (%s) in %s: snapshot %d\n", len(ids), *pattern, time.Since(began).Round(time.Millisecond), tbl.CurrentSnapshot().SnapshotID)
		return exitOK, nil
	}
	per := (*rowsN + int64(*commits) - 1) / int64(*commits)
	for from := *start; from < *start+*rowsN; from += per {
		to := min(from+per, *start+*rowsN)
		if tbl, err = workload.Append(ctx, tbl, from, to, 0, *seed); err != nil {
			return exitError, err
		}
		e.log.Info("appended orders", "table", *tableName, "from", from, "to", to, "snapshot", tbl.CurrentSnapshot().SnapshotID)
	}
	el := time.Since(began)
	fmt.Fprintf(stdout, "wrote %d orders to %s in %s (%.0f rows/s)\n", *rowsN, *tableName, el.Round(time.Millisecond), float64(*rowsN)/el.Seconds())
	return exitOK, nil
}
