package compactor

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/extsort"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/tablescan"
)

// BuildOptions tune a full build.
type BuildOptions struct {
	RangeWriterOptions
	// MemoryBudget bounds the entries sorted in memory before the sort
	// spills to disk. Default: 512 MiB.
	MemoryBudget int64
	// SpillDir holds the spilled sort. Default: the OS temp dir.
	SpillDir string
	// Logger receives progress at debug level. Default: discard.
	Logger *slog.Logger
	// Progress, when set, is called about once a second and at each phase
	// change. Default: none.
	Progress func(BuildProgress)
}

// BuildProgress reports where a build is.
type BuildProgress struct {
	Phase        string // "scan", "write", "done"
	RowsScanned  int64
	RowsExpected int64 // from the snapshot summary; 0 when unknown
	RowsWritten  int64
	FilesWritten int
	BytesWritten int64
}

// BuildResult is what a full build wrote.
type BuildResult struct {
	Entries []format.TrackingEntry // range files in cluster order
	Rows    int64
	Bytes   int64
	Spilled bool
	Scan    tablescan.Stats
}

// FullBuild indexes every live row of snapshot snap and writes the range
// files under dir. It does not commit: the caller publishes the entries.
// On error, files it finished are deleted.
func FullBuild(ctx context.Context, tbl *table.Table, snap *table.Snapshot, md *format.Metadata, dir string, opts BuildOptions) (*BuildResult, error) {
	if opts.MemoryBudget <= 0 {
		opts.MemoryBudget = 512 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.RangeWriterOptions.ensureDefaults()
	schema := lineage.SnapshotSchema(tbl, snap)
	is, err := format.NewIndexSchema(md, schema)
	if err != nil {
		return nil, fmt.Errorf("resolve index against table schema: %w", err)
	}
	codec := format.NewEntryCodec(is)
	// Half the budget holds records; the rest is Arrow batches, Parquet row
	// groups and the garbage collector's headroom.
	sorter := extsort.NewSorter(opts.SpillDir, opts.MemoryBudget/2, opts.Logger)
	defer sorter.Close()

	prog := BuildProgress{Phase: "scan"}
	if snap != nil {
		if n, err := strconv.ParseInt(snap.Summary.Properties["total-records"], 10, 64); err == nil {
			prog.RowsExpected = n
		}
	}
	last := time.Now()
	report := func(force bool) {
		if opts.Progress != nil && (force || time.Since(last) >= time.Second) {
			last = time.Now()
			opts.Progress(prog)
		}
	}
	report(true)

	var key, val []byte
	var row format.Key
	columns, err := tablescan.TopLevelColumns(schema, is.SourceFieldIDs())
	if err != nil {
		return nil, err
	}
	scanStats, err := tablescan.Scan(ctx, tbl, snap, tablescan.Options{Columns: columns, Allocator: opts.Allocator},
		func(src arrow.RecordBatch) error {
			entries, err := format.Entries(opts.Allocator, is, format.RecordColumns(src, schema))
			if err != nil {
				return err
			}
			defer entries.Release()
			for i := 0; i < int(entries.NumRows()); i++ {
				row = codec.Row(row, entries, i)
				// The full staging key, not the clustering key alone: entries
				// of one clustering key are written in identity order, which
				// incremental merges rely on.
				if key, err = codec.AppendKey(key[:0], row); err != nil {
					return err
				}
				if val, err = codec.AppendValue(val[:0], row); err != nil {
					return err
				}
				if err := sorter.Add(key, val); err != nil {
					return err
				}
			}
			prog.RowsScanned += entries.NumRows()
			report(false)
			return ctx.Err()
		})
	if err != nil {
		return nil, fmt.Errorf("scan table snapshot: %w", err)
	}
	opts.Logger.Debug("build scanned", "rows", scanStats.RowsLive, "data_files", scanStats.DataFiles, "spilled", sorter.Spilled())

	prog.Phase = "write"
	report(true)
	w, err := NewRangeWriter(ctx, is, dir, opts.RangeWriterOptions)
	if err != nil {
		return nil, err
	}
	// The build knows how many entries follow, so no file but the only one
	// ends up small.
	total := sorter.Len()
	w.remaining = func() int64 { return total - prog.RowsWritten - 1 }
	err = sorter.Iterate(func(_, v []byte) error {
		entry, err := codec.DecodeValue(v)
		if err != nil {
			return err
		}
		if err := w.Add(entry); err != nil {
			return err
		}
		prog.RowsWritten++
		if prog.RowsWritten%8192 == 0 {
			prog.FilesWritten, prog.BytesWritten = len(w.Written()), w.BytesWritten()
			report(false)
			return ctx.Err()
		}
		return nil
	})
	if err != nil {
		w.Abort()
		RemoveFiles(ctx, opts.Store, opts.Logger, w.Written())
		return nil, err
	}
	entries, err := w.Close()
	if err != nil {
		RemoveFiles(ctx, opts.Store, opts.Logger, w.Written())
		return nil, err
	}
	prog.Phase, prog.FilesWritten, prog.BytesWritten = "done", len(entries), w.BytesWritten()
	report(true)
	return &BuildResult{Entries: entries, Rows: prog.RowsWritten, Bytes: w.BytesWritten(), Spilled: sorter.Spilled(), Scan: scanStats}, nil
}
