package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"

	"github.com/streamidx/streamidx/internal/config"
)

// The tools of the equality-delete measurements: what a reader pays
// (iceberg-go's own full scan) and what the alternative to rewrite-deletes
// costs (iceberg-go's own compaction).

func init() {
	register(command{name: "scan-table", summary: "time iceberg-go's full scan of a table (measurements)", run: runScanTable})
	register(command{name: "compact-table", summary: "compact a table with iceberg-go's RewriteDataFiles, applying its deletes (measurements)", run: runCompactTable})
}

func runScanTable(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addTableFlags(fs, "table snapshot `id` to scan (default: the current one)")
	var opts []table.ScanOption
	key := fs.String("key", "", "scan only rows where `COLUMN=VALUE` (an integer column), with iceberg-go's row filter")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if *key != "" {
		col, val, ok := strings.Cut(*key, "=")
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if !ok || err != nil {
			return exitError, fmt.Errorf("--key %q: want COLUMN=INTEGER", *key)
		}
		opts = append(opts, table.WithRowFilter(iceberg.EqualTo(iceberg.Reference(strings.TrimSpace(col)), v)))
	}
	tbl, e, err := openTable(ctx, g, fs, f.table)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	if f.snapshot != 0 {
		opts = append(opts, table.WithSnapshotID(f.snapshot))
	}
	began := time.Now()
	_, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return exitError, fmt.Errorf("scan %s: %w", f.table, err)
	}
	var rows int64
	for rec, err := range recs {
		if err != nil {
			return exitError, fmt.Errorf("scan %s: %w", f.table, err)
		}
		rows += rec.NumRows()
		rec.Release()
	}
	fmt.Fprintf(stdout, "scanned %d rows of %s in %s\n", rows, f.table, time.Since(began).Round(time.Millisecond))
	return exitOK, nil
}

func runCompactTable(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addTableFlags(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	tbl, e, err := openTable(ctx, g, fs, f.table)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	began := time.Now()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return exitError, fmt.Errorf("plan files of %s: %w", f.table, err)
	}
	// Every file is a candidate: the point is a table without deletes.
	cfg := compaction.DefaultConfig()
	cfg.MinInputFiles = 1
	cfg.MinFileSizeBytes = cfg.TargetFileSizeBytes
	plan, err := cfg.PlanCompaction(tasks)
	if err != nil {
		return exitError, err
	}
	groups := make([]table.CompactionTaskGroup, len(plan.Groups))
	rewritten := map[string]struct{}{}
	for i, gr := range plan.Groups {
		groups[i] = table.CompactionTaskGroup{PartitionKey: gr.PartitionKey, Tasks: gr.Tasks, TotalSizeBytes: gr.TotalSizeBytes}
		for _, t := range gr.Tasks {
			rewritten[t.File.FilePath()] = struct{}{}
		}
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return exitError, err
	}
	dead, err := compaction.CollectDeadEqualityDeletesWithSpecs(ctx, fsys, tbl.Metadata(), tbl.CurrentSnapshot(), rewritten)
	if err != nil {
		return exitError, fmt.Errorf("collect dead equality deletes: %w", err)
	}
	res, err := tbl.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{ExtraDeleteFilesToRemove: dead,
		SnapshotProps: iceberg.Properties{"streamidx.compact-table": "true"}})
	if err != nil {
		return exitError, fmt.Errorf("compact %s: %w", f.table, err)
	}
	fmt.Fprintf(stdout, "compacted %s in %s: %d data files into %d, %d bytes written, %d equality and %d position delete files and %d deletion vectors removed\n",
		f.table, time.Since(began).Round(time.Millisecond), res.RemovedDataFiles, res.AddedDataFiles, res.BytesAfter,
		res.RemovedEqualityDeleteFiles, res.RemovedPositionDeleteFiles, res.RemovedDeletionVectorFiles)
	return exitOK, nil
}

// openTable opens the environment and loads a table given by --table.
func openTable(ctx context.Context, g *globals, fs *flag.FlagSet, name string) (*table.Table, *env, error) {
	if err := requireFlags(fs, "table"); err != nil {
		return nil, nil, err
	}
	id, err := config.ParseTable(name)
	if err != nil {
		return nil, nil, err
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return nil, nil, err
	}
	tbl, err := e.cat.LoadTable(ctx, id)
	if err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("load table %s: %w", name, err)
	}
	return tbl, e, nil
}
