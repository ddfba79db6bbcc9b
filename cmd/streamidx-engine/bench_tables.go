package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/indexdef"
	"github.com/streamidx/streamidx/internal/workload"
	"github.com/streamidx/streamidx/updater"
)

// The tables of the build, update, lookup, scan and verify figures: an
// append-only orders table and a CDC one of the same size (the same orders,
// then upsert commits with equality deletes), both Iceberg v3 so that
// rewrite-deletes writes deletion vectors, each with its pk index built.
// Each is kept pristine and copied back to the same path before a group
// uses it (the catalog holds absolute paths), so that no group sees
// another's changes.

// benchUpsertCommits is the number of upsert commits of the CDC table.
const benchUpsertCommits = 50

// benchTableSpec describes one stored table.
type benchTableSpec struct {
	name    string // append or cdc
	upserts int    // upsert commits after the appends
}

// upsertKeys is the number of orders each upsert commit of the CDC table
// changes: 0.2% of the table, as in the 5M-row measurement of the issue.
func (b *bench) upsertKeys() int64 { return max(b.rows/500, 1) }

// tableDir is where groups work on table name; its pristine copy is beside.
func (b *bench) tableDir(name string) string { return filepath.Join(b.dir, "tables", name) }
func (b *bench) tablePristine(name string) string {
	return filepath.Join(b.dir, "tables", name+".pristine")
}

// openEnvAt opens the catalogs of a table directory.
func (b *bench) openEnvAt(ctx context.Context, dir string, serving bool) (*env, error) {
	g := *b.g
	g.serving = serving
	g.catalogURI = config.SQLiteURI(filepath.Join(dir, "catalog.db"))
	g.warehouse = format.FileURI(filepath.Join(dir, "warehouse"))
	e, err := openEnv(ctx, &g)
	if err != nil {
		return nil, err
	}
	e.log = b.log
	return e, nil
}

// freshTable writes the pristine table of spec unless an earlier run left
// one of the same shape, and copies it to its working directory.
func (b *bench) freshTable(ctx context.Context, spec benchTableSpec) (string, error) {
	cfg, err := b.g.config()
	if err != nil {
		return "", err
	}
	dir, pristine := b.tableDir(spec.name), b.tablePristine(spec.name)
	marker := filepath.Join(pristine, ".streamidx-bench")
	want := fmt.Sprintf("orders %d, upsert commits %d of %d keys, %s\n", b.rows, spec.upserts, b.upsertKeys(), rangeFileRule(cfg.Build))
	if got, err := os.ReadFile(marker); err != nil || string(got) != want {
		if err := b.writeStoredTable(ctx, spec); err != nil {
			return "", fmt.Errorf("write the %s table: %w", spec.name, err)
		}
		if err := os.RemoveAll(pristine); err != nil {
			return "", err
		}
		if err := os.CopyFS(pristine, os.DirFS(dir)); err != nil {
			return "", fmt.Errorf("keep a pristine copy: %w", err)
		}
		if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
			return "", err
		}
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, os.DirFS(pristine)); err != nil {
		return "", fmt.Errorf("restore the %s table: %w", spec.name, err)
	}
	return dir, os.Remove(filepath.Join(dir, ".streamidx-bench"))
}

func (b *bench) writeStoredTable(ctx context.Context, spec benchTableSpec) error {
	e, id, tbl, err := b.newOrdersTable(ctx, b.tableDir(spec.name), 3)
	if err != nil {
		return err
	}
	defer e.Close()
	const appends = 4
	per := (b.rows + appends - 1) / appends
	began := time.Now()
	for from := int64(0); from < b.rows; from += per {
		if tbl, err = workload.Append(ctx, tbl, from, min(from+per, b.rows), 0, 1); err != nil {
			return err
		}
	}
	b.note("%s table: wrote %d orders (%s)", spec.name, b.rows, time.Since(began).Round(time.Second))
	for i := 1; i <= spec.upserts; i++ {
		ids, err := workload.UpsertIDs(b.rows, b.upsertKeys(), "uniform", uint64(i))
		if err != nil {
			return err
		}
		if tbl, err = workload.Upsert(ctx, tbl, ids, i, uint64(i)); err != nil {
			return err
		}
		if i%10 == 0 || i == spec.upserts {
			b.note("%s table: %d of %d upsert commits of %d keys (%s)", spec.name, i, spec.upserts, len(ids), time.Since(began).Round(time.Second))
		}
	}
	if err := b.createIndex(ctx, e, tbl, id, "pk"); err != nil {
		return err
	}
	_, err = b.buildInProcess(ctx, e, tbl, id, "pk", compactor.RangeWriterOptions{})
	return err
}

// newOrdersTable empties dir and opens an environment there with a new
// orders table of the given format version: the environment (to close),
// the table's identifier and the table.
func (b *bench) newOrdersTable(ctx context.Context, dir string, formatVersion int) (*env, table.Identifier, *table.Table, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	e, err := b.openEnvAt(ctx, dir, false)
	if err != nil {
		return nil, nil, nil, err
	}
	id, _ := config.ParseTable(benchTable)
	tbl, err := workload.CreateOrders(ctx, e.cat, id, formatVersion)
	if err != nil {
		e.Close()
		return nil, nil, nil, err
	}
	return e, id, tbl, nil
}

// createIndex defines index name (one of the demo's) on tbl.
func (b *bench) createIndex(ctx context.Context, e *env, tbl *table.Table, id table.Identifier, name string) error {
	def, err := indexdef.Parse([]byte(demoDefinitions[name]))
	if err != nil {
		return err
	}
	loc, err := e.indexLocation(tbl, id, name)
	if err != nil {
		return err
	}
	md, err := def.Resolve(tbl.Schema(), tbl.Metadata().TableUUID().String(), loc)
	if err != nil {
		return err
	}
	_, err = e.indexes.Create(ctx, id, name, md)
	return err
}

// rangeFileRule describes the range file options of build, for the marker
// that tells whether a stored table's index was built with them.
func rangeFileRule(build config.BuildConfig) string {
	return fmt.Sprintf("target file size %s or %d entries, row groups %d", build.TargetFileSize, build.TargetFileEntries, build.RowGroupRows)
}

// buildInProcess builds and publishes index name of tbl's current snapshot,
// with the configuration's range file options unless rw sets its own.
func (b *bench) buildInProcess(ctx context.Context, e *env, tbl *table.Table, id table.Identifier, name string, rw compactor.RangeWriterOptions) (time.Duration, error) {
	md, _, err := e.indexes.Load(ctx, id, name)
	if err != nil {
		return 0, err
	}
	if rw == (compactor.RangeWriterOptions{}) {
		rw = compactor.ConfiguredRangeWriter(e.cfg.Build, e.store)
	}
	rw.Store = e.store
	began, last := time.Now(), time.Now()
	res, err := updater.BuildAndPublish(ctx, e.indexes, tbl, name, md, tbl.CurrentSnapshot(), updater.BuildOptions{
		Build: compactor.BuildOptions{
			RangeWriterOptions: rw,
			MemoryBudget:       int64(e.cfg.Build.MemoryBudget), SpillDir: e.cfg.Build.SpillDir, Logger: b.log,
			Progress: func(p compactor.BuildProgress) {
				if time.Since(last) >= 10*time.Second {
					last = time.Now()
					b.note("building %s: %s, %d of %d rows scanned", name, p.Phase, p.RowsScanned, p.RowsExpected)
				}
			},
		},
	})
	if err != nil {
		return 0, fmt.Errorf("build %s: %w", name, err)
	}
	took := time.Since(began)
	b.note("built %s: %d entries in %d range files (%s) in %s", name, res.Rows, len(res.Entries), humanBytes(res.Bytes), took.Round(time.Millisecond))
	return took, nil
}

// childRun is what one streamidx child process used.
type childRun struct {
	stdout string
	wall   time.Duration
	cpu    time.Duration // user + system
	maxRSS int64         // bytes
}

// child runs this streamidx executable on the catalogs of dir, so that its
// time and peak memory are its own.
func (b *bench) child(ctx context.Context, dir string, args ...string) (childRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return childRun{}, err
	}
	cmd := exec.CommandContext(ctx, exe, append(childArgs(b, dir), args...)...)
	cmd.Dir = dir
	rssFile, err := os.CreateTemp("", "streamidx-peak-rss-*")
	if err != nil {
		return childRun{}, err
	}
	rssPath := rssFile.Name()
	rssFile.Close()
	defer os.Remove(rssPath)
	cmd.Env = append(os.Environ(), peakRSSEnv+"="+rssPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err = cmd.Run()
	r := childRun{stdout: stdout.String(), wall: time.Since(began)}
	if err != nil {
		return r, fmt.Errorf("streamidx %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// Not ru.Maxrss: on Linux it is never below this process's resident
	// memory when the child started (see peakrss.go).
	if r.maxRSS, err = readPeakRSS(rssPath); err != nil {
		return r, fmt.Errorf("streamidx %s: %w", strings.Join(args, " "), err)
	}
	return r, nil
}

// mib converts bytes to MiB for the figures.
func mib(n int64) float64 { return float64(n) / (1 << 20) }
