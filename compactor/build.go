package compactor

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

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
	// Workers is how many data files are read, and their entries sorted,
	// at once. Default: GOMAXPROCS.
	Workers int
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
//
// Data files are read by opts.Workers goroutines at once, each turning its
// rows into sort records in a sorter of its own; the sorters are merged into
// the range writer. A record carries the rank of its data file among the
// snapshot's data file paths instead of the path: the path is most of an
// entry's bytes, and ranks order as the paths do, so the records sort as
// the entries would while the sort holds several times more of them in
// memory.
func FullBuild(ctx context.Context, tbl *table.Table, snap *table.Snapshot, md *format.Metadata, dir string, opts BuildOptions) (*BuildResult, error) {
	if opts.MemoryBudget <= 0 {
		opts.MemoryBudget = 512 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
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
	columns, err := tablescan.TopLevelColumns(schema, is.SourceFieldIDs())
	if err != nil {
		return nil, err
	}
	plan, err := tablescan.NewPlan(ctx, tbl, snap, tablescan.Options{Columns: columns, Allocator: opts.Allocator})
	if err != nil {
		return nil, fmt.Errorf("plan the scan of the table snapshot: %w", err)
	}
	enc := newRecordCodec(is, schema, plan)
	workers := max(1, min(opts.Workers, len(plan.Files)))
	// Half the budget holds records; the rest is Arrow batches, Parquet row
	// groups and the garbage collector's headroom.
	sorters := make([]*extsort.Sorter, workers)
	for i := range sorters {
		sorters[i] = extsort.NewSorter(opts.SpillDir, opts.MemoryBudget/2/int64(workers), opts.Logger)
		defer sorters[i].Close()
	}

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

	var next, scanned atomic.Int64
	stats := make([]tablescan.Stats, workers)
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			var rb recordBuilder
			for {
				i := int(next.Add(1) - 1)
				if i >= len(plan.Files) {
					return nil
				}
				st, err := plan.ScanFile(gctx, i, func(src arrow.RecordBatch) error {
					n, err := rb.add(enc, opts.Allocator, src, i, sorters[w])
					scanned.Add(n)
					return err
				})
				stats[w].Add(st)
				if err != nil {
					return err
				}
			}
		})
	}
	scanDone := make(chan error, 1)
	go func() { scanDone <- g.Wait() }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-tick.C:
			prog.RowsScanned = scanned.Load()
			report(false)
		case err = <-scanDone:
			break wait
		}
	}
	if err != nil {
		return nil, fmt.Errorf("scan table snapshot: %w", err)
	}
	scanStats := tablescan.Stats{DeleteFiles: plan.DeleteFiles()}
	spilled := false
	for w := range workers {
		scanStats.Add(stats[w])
		spilled = spilled || sorters[w].Spilled()
	}
	prog.RowsScanned = scanStats.RowsLive
	opts.Logger.Debug("build scanned", "rows", scanStats.RowsLive, "data_files", scanStats.DataFiles, "workers", workers, "spilled", spilled)

	prog.Phase = "write"
	report(true)
	w, err := NewRangeWriter(ctx, is, dir, opts.RangeWriterOptions)
	if err != nil {
		return nil, err
	}
	if err := writeSorted(ctx, w, enc, sorters, opts, func(rows int64) {
		prog.RowsWritten = rows
		prog.FilesWritten, prog.BytesWritten = len(w.Written()), w.BytesWritten()
		report(false)
	}); err != nil {
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
	return &BuildResult{Entries: entries, Rows: prog.RowsWritten, Bytes: w.BytesWritten(), Spilled: spilled, Scan: scanStats}, nil
}

// writeSorted merges the sorters into w. One goroutine merges the records
// and gathers their entries into Arrow batches while the calling one hands
// the batches to the range writer, which encodes them as Parquet: the two
// halves of the write phase cost about the same. written is called after
// each batch with the entries written so far.
func writeSorted(ctx context.Context, w *RangeWriter, enc *recordCodec, sorters []*extsort.Sorter, opts BuildOptions, written func(int64)) error {
	var total int64
	for _, s := range sorters {
		total += s.Len()
	}
	// The build knows how many entries follow, so no file but the only one
	// ends up small.
	var handed int64
	w.remaining = func() int64 { return total - handed }

	mergeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan arrow.RecordBatch, 2)
	merged := make(chan error, 1)
	go func() {
		defer close(batches)
		b := newEntryBatcher(enc, w.arrowSchema, opts.Allocator)
		defer b.release()
		send := func() error {
			rec, err := b.batch()
			if err != nil {
				return err
			}
			select {
			case batches <- rec:
				return nil
			case <-mergeCtx.Done():
				rec.Release()
				return mergeCtx.Err()
			}
		}
		err := extsort.Merge(sorters, func(_, v []byte) error {
			if err := b.add(v); err != nil {
				return err
			}
			if b.rows == opts.BatchRows {
				return send()
			}
			return nil
		})
		if err == nil && b.rows > 0 {
			err = send()
		}
		merged <- err
	}()
	var err error
	for rec := range batches {
		if err == nil {
			handed += rec.NumRows()
			if err = w.AddRows(rec, 0, int(rec.NumRows())); err == nil {
				written(handed)
				err = ctx.Err()
			}
			if err != nil {
				cancel() // the merge stops; what it sent is drained
			}
		}
		rec.Release()
	}
	if mergeErr := <-merged; err == nil {
		err = mergeErr
	}
	return err
}

// entryBatcher gathers the entries of sort records into Arrow batches of
// the entry schema. The _file columns are filled when a batch is taken,
// into a buffer sized once from the paths' lengths: appending the paths
// one by one grows it again and again.
type entryBatcher struct {
	enc     *recordCodec
	b       *array.RecordBuilder
	isFile  []bool
	ranks   []uint32
	rows    int
	dataLen int
}

func newEntryBatcher(enc *recordCodec, schema *arrow.Schema, mem memory.Allocator) *entryBatcher {
	b := &entryBatcher{enc: enc, b: array.NewRecordBuilder(mem, schema), isFile: make([]bool, schema.NumFields())}
	for _, p := range enc.filePos {
		b.isFile[p] = true
	}
	return b
}

func (b *entryBatcher) add(v []byte) error {
	entry, err := b.enc.codec.DecodeValue(v)
	if err != nil {
		return err
	}
	for i, val := range entry {
		if b.isFile[i] {
			continue
		}
		if err := format.AppendValue(b.b.Field(i), val); err != nil {
			return fmt.Errorf("range file entry field %d: %w", b.enc.is.Fields()[i].ID, err)
		}
	}
	if len(b.enc.filePos) > 0 {
		r, err := b.enc.rank(entry[b.enc.filePos[0]])
		if err != nil {
			return err
		}
		b.ranks = append(b.ranks, r)
		b.dataLen += len(b.enc.paths[r])
	}
	b.rows++
	return nil
}

// batch returns the entries added since the last batch.
func (b *entryBatcher) batch() (arrow.RecordBatch, error) {
	for _, p := range b.enc.filePos {
		fb := b.b.Field(p)
		if sb, ok := fb.(*array.StringBuilder); ok {
			sb.Reserve(len(b.ranks))
			sb.ReserveData(b.dataLen)
		}
		for _, r := range b.ranks {
			if err := format.AppendValue(fb, b.enc.paths[r]); err != nil {
				return nil, fmt.Errorf("range file entry field %d: %w", b.enc.is.Fields()[p].ID, err)
			}
		}
	}
	b.ranks, b.rows, b.dataLen = b.ranks[:0], 0, 0
	return b.b.NewRecordBatch(), nil
}

func (b *entryBatcher) release() { b.b.Release() }

// recordCodec turns entries into sort records and back: the staging key
// (the full key, not the clustering key alone: entries of one clustering
// key are written in identity order, which incremental merges rely on) and
// the entry's values, with the rank of the data file standing in for its
// path in the fields that hold the path itself.
type recordCodec struct {
	is     *format.IndexSchema
	schema *iceberg.Schema // the source schema the scan's columns are matched with
	codec  *format.EntryCodec
	// filePos are the entry positions of the fields that are _file.
	filePos []int
	// ranks[i] is the rank of the path of plan file i, as the string that
	// stands in for it; paths[r] is the path of rank r.
	ranks []any
	paths []string
}

// rankBytes is the length of a rank: big-endian, so ranks order as numbers.
const rankBytes = 4

func newRecordCodec(is *format.IndexSchema, schema *iceberg.Schema, plan *tablescan.Plan) *recordCodec {
	c := &recordCodec{is: is, schema: schema, codec: format.NewEntryCodec(is)}
	for i, f := range is.Fields() {
		if r, ok := f.Expr.(format.Ref); ok && f.Kind == format.KindMaterialized && r.ID == format.FieldIDFile {
			c.filePos = append(c.filePos, i)
		}
	}
	byPath := make([]int, len(plan.Files))
	for i := range byPath {
		byPath[i] = i
	}
	slices.SortFunc(byPath, func(a, b int) int {
		return strings.Compare(plan.Files[a].File.FilePath(), plan.Files[b].File.FilePath())
	})
	c.ranks = make([]any, len(plan.Files))
	rank := -1
	for j, i := range byPath {
		path := plan.Files[i].File.FilePath()
		// A path listed twice (which a valid snapshot never does) keeps one
		// rank, so its rows still order by position.
		if j == 0 || path != plan.Files[byPath[j-1]].File.FilePath() {
			rank++
			c.paths = append(c.paths, path)
		}
		c.ranks[i] = string(binary.BigEndian.AppendUint32(nil, uint32(rank)))
	}
	return c
}

// rank reads the rank that a record holds in place of a path.
func (c *recordCodec) rank(v any) (uint32, error) {
	s, _ := v.(string)
	if len(s) != rankBytes {
		return 0, fmt.Errorf("decode sort record: file rank of %d bytes", len(s))
	}
	r := binary.BigEndian.Uint32([]byte(s))
	if int(r) >= len(c.paths) {
		return 0, fmt.Errorf("decode sort record: file rank %d of %d files", r, len(c.paths))
	}
	return r, nil
}

// recordBuilder holds the buffers of one goroutine's records.
type recordBuilder struct {
	row      format.Key
	key, val []byte
}

// add puts the entries of src, rows of plan file file, into sorter and
// returns how many it added.
func (b *recordBuilder) add(c *recordCodec, mem memory.Allocator, src arrow.RecordBatch, file int, sorter *extsort.Sorter) (int64, error) {
	entries, err := format.Entries(mem, c.is, format.RecordColumns(src, c.schema))
	if err != nil {
		return 0, err
	}
	defer entries.Release()
	rank := c.ranks[file]
	for i := 0; i < int(entries.NumRows()); i++ {
		b.row = c.codec.Row(b.row, entries, i)
		for _, p := range c.filePos {
			b.row[p] = rank
		}
		if b.key, err = c.codec.AppendKey(b.key[:0], b.row); err != nil {
			return 0, err
		}
		if b.val, err = c.codec.AppendValue(b.val[:0], b.row); err != nil {
			return 0, err
		}
		if err := sorter.Add(b.key, b.val); err != nil {
			return 0, err
		}
	}
	return entries.NumRows(), nil
}
