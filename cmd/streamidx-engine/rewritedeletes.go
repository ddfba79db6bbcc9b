package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/rewrite"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

func init() {
	register(command{name: "rewrite-deletes", summary: "turn a table's equality deletes into deletion vectors (v3) or position deletes (v2) through an index", run: runRewriteDeletes})
}

func runRewriteDeletes(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	tableName := fs.String("table", "", "table `NS.TABLE`")
	index := fs.String("index", "", "index `name` with _file and _pos to resolve through (default: the table's first such index)")
	dryRun := fs.Bool("dry-run", false, "print what would change in the table and change nothing there (an index that lags the table is still brought up to date first, as --no-align would refuse it)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	minFiles := fs.Int("min-files", 1, "do nothing while the table has fewer than `N` live equality delete files (at least 1)")
	noAlign := fs.Bool("no-align", false, "refuse an index that lags the table instead of bringing it up to date first")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if err := requireFlags(fs, "table"); err != nil {
		return exitError, err
	}
	if *minFiles < 1 {
		return exitError, fmt.Errorf("--min-files %d: want at least 1", *minFiles)
	}
	id, err := config.ParseTable(*tableName)
	if err != nil {
		return exitError, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	opts := rewrite.Options{Index: *index, DryRun: *dryRun, MinFiles: *minFiles, Store: e.store, Logger: e.log}
	if !*noAlign {
		// A staging store of its own: a daemon may hold run.stage-dir, and
		// what is staged here is needed only until it is published.
		dir, err := os.MkdirTemp(e.cfg.Build.SpillDir, "streamidx-rewrite-stage-")
		if err != nil {
			return exitError, fmt.Errorf("create staging directory: %w", err)
		}
		defer os.RemoveAll(dir)
		store, err := staging.OpenStore(dir, staging.StoreOptions{Logger: e.log})
		if err != nil {
			return exitError, err
		}
		defer store.Close()
		opts.Align = func(ctx context.Context, name string) error {
			u := updater.New(e.cat, e.indexes, store, id, name, updater.Options{
				Range:        compactor.ConfiguredRangeWriter(e.cfg.Build, e.store),
				MemoryBudget: int64(e.cfg.Build.MemoryBudget), SpillDir: e.cfg.Build.SpillDir, Logger: e.log,
			})
			for {
				st, err := u.Step(ctx, nil)
				if err != nil || st.Aligned {
					return err
				}
			}
		}
	}
	res, err := rewrite.Run(ctx, e.cat, e.indexes, id, opts)
	if err != nil {
		return exitError, err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			return exitError, err
		}
		return exitOK, nil
	}
	printRewrite(stdout, res)
	return exitOK, nil
}

func printRewrite(w io.Writer, res *rewrite.Result) {
	if res.Skipped != "" {
		fmt.Fprintf(w, "%s: nothing to rewrite at snapshot %d: %s\n", res.Table, res.SnapshotID, res.Skipped)
		return
	}
	verb := "rewrote"
	if res.DryRun {
		verb = "would rewrite"
	}
	fmt.Fprintf(w, "%s: %s %d equality delete files of snapshot %d through index %s\n", res.Table, verb, len(res.EqualityFiles), res.SnapshotID, res.Index)
	fmt.Fprintln(w, "equality delete file\trows resolved\tdata files touched")
	for _, f := range res.EqualityFiles {
		fmt.Fprintf(w, "%s\t%d\t%d\n", f.Path, f.Rows, f.DataFilesTouched)
	}
	fmt.Fprintln(w, "data file\tpositions added\tpositions deleted")
	for _, f := range res.DataFiles {
		fmt.Fprintf(w, "%s\t%d\t%d\n", f.Path, f.PositionsAdded, f.Deleted)
	}
	fmt.Fprintf(w, "%d index entries read to find the live positions\n", res.IndexEntriesRead)
	if res.DryRun {
		fmt.Fprintf(w, "%d positions in %d data files (dry run: nothing written to the table)\n", res.PositionsAdded, len(res.DataFiles))
		return
	}
	fmt.Fprintf(w, "committed snapshot %d: %d equality delete files and %d replaced delete files removed, %d positions in %d new deletion vectors or position delete files (%d bytes), %d conflicts, %s\n",
		res.CommittedSnapshotID, res.EqualityFilesRemoved, res.DeleteFilesReplaced, res.PositionsAdded, res.DeleteFilesWritten,
		res.BytesWritten, res.Conflicts, res.Took.Round(time.Millisecond))
}
