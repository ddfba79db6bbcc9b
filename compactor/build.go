package compactor

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// Yield, when set, is called before each batch of rows is scanned or
	// written, on the goroutine doing it; an error ends the build. The
	// daemon's builds wait there for shorter updates (internal/pace).
	Yield func(context.Context) error
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

// checkpoint calls yield (a build's or a merge's Yield) when it is set.
func checkpoint(ctx context.Context, yield func(context.Context) error) error {
	if yield == nil {
		return nil
	}
	return yield(ctx)
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
	// Three eighths of the budget hold records; the rest is Arrow batches,
	// Parquet row groups, the equality deletes of the table and the garbage
	// collector's headroom.
	sorters := make([]*extsort.Sorter, workers)
	for i := range sorters {
		sorters[i] = extsort.NewSorter(opts.SpillDir, opts.MemoryBudget*3/8/int64(workers), opts.Logger)
		defer sorters[i].Close()
	}

	began := time.Now()
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
					if err := checkpoint(gctx, opts.Yield); err != nil {
						return err
					}
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
	opts.Logger.Debug("build scanned", "rows", scanStats.RowsLive, "data_files", scanStats.DataFiles, "workers", workers, "spilled", spilled,
		"took", time.Since(began).Round(time.Millisecond))
	began = time.Now()

	prog.Phase = "write"
	report(true)
	w, err := NewRangeWriter(ctx, is, dir, opts.RangeWriterOptions)
	if err != nil {
		return nil, err
	}
	if err := writeSorted(ctx, w, enc, sorters, opts, func(rows int64) {
		prog.RowsWritten = rows
		prog.FilesWritten, prog.BytesWritten = w.Files(), w.BytesWritten()
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
	opts.Logger.Debug("build wrote", "rows", prog.RowsWritten, "files", len(entries), "took", time.Since(began).Round(time.Millisecond))
	prog.Phase, prog.FilesWritten, prog.BytesWritten = "done", len(entries), w.BytesWritten()
	report(true)
	return &BuildResult{Entries: entries, Rows: prog.RowsWritten, Bytes: w.BytesWritten(), Spilled: spilled, Scan: scanStats}, nil
}

// writeSorted merges the sorters into w in three stages, each its own
// goroutines: the merge copies the records' values into chunks of
// BatchRows; opts.Workers decoders turn chunks into Arrow batches of
// entries; the calling goroutine hands the batches, in merge order, to the
// range writer, which encodes them as Parquet. Decoding an entry costs
// more than merging it, so the merge alone would leave a core idle.
// written is called after each batch with the entries written so far.
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
	work := make(chan *valueChunk, opts.Workers)
	order := make(chan chan decoded, 2*opts.Workers)
	merged := make(chan error, 1)
	// Chunks the decoders are done with, for the merge to fill again.
	spare := make(chan *valueChunk, 2*opts.Workers+2)
	go func() {
		defer close(order)
		defer close(work)
		c := &valueChunk{}
		dispatch := func() error {
			// The chunk belongs to a decoder once sent, which clears it.
			out, size := make(chan decoded, 1), cap(c.data)
			c.out = out
			select {
			case work <- c:
			case <-mergeCtx.Done():
				return mergeCtx.Err()
			}
			select {
			case order <- out:
			case <-mergeCtx.Done():
				return mergeCtx.Err()
			}
			select {
			case c = <-spare:
			default:
				c = &valueChunk{data: make([]byte, 0, size), ends: make([]int, 0, opts.BatchRows)}
			}
			return nil
		}
		err := extsort.Merge(sorters, func(_, v []byte) error {
			c.data = append(c.data, v...)
			c.ends = append(c.ends, len(c.data))
			if len(c.ends) == opts.BatchRows {
				return dispatch()
			}
			return nil
		})
		if err == nil && len(c.ends) > 0 {
			err = dispatch()
		}
		merged <- err
	}()
	// Each batch holds two buffers per _file field until the range writer
	// has written it; the pool keeps those of a few batches for the next
	// ones (at 10M entries, keeping those of every batch in flight raised
	// the peak RSS and sped nothing up).
	pool := &bufferPool{max: 2 * len(enc.filePos) * (opts.Workers + 2)}
	var decoders sync.WaitGroup
	for range opts.Workers {
		decoders.Go(func() {
			b := newEntryBatcher(enc, w.arrowSchema, opts.Allocator, pool)
			defer b.release()
			for c := range work {
				rec, err := b.decode(c)
				c.out <- decoded{rec, err}
				c.data, c.ends, c.out = c.data[:0], c.ends[:0], nil
				select {
				case spare <- c:
				default:
				}
			}
		})
	}
	var err error
	for out := range order {
		d := <-out
		if err == nil {
			err = d.err
		}
		if err == nil {
			err = checkpoint(ctx, opts.Yield)
		}
		if err == nil {
			handed += d.rec.NumRows()
			if err = w.AddRows(d.rec, 0, int(d.rec.NumRows())); err == nil {
				written(handed)
				err = ctx.Err()
			}
		}
		if d.rec != nil {
			d.rec.Release()
		}
		if err != nil {
			cancel() // the merge stops; what it sent is drained
		}
	}
	decoders.Wait()
	if mergeErr := <-merged; err == nil {
		err = mergeErr
	}
	return err
}

// valueChunk is a run of merged records' values, in merge order: value i
// is data[ends[i-1]:ends[i]]. out receives its decoded batch.
type valueChunk struct {
	data []byte
	ends []int
	out  chan decoded
}

type decoded struct {
	rec arrow.RecordBatch
	err error
}

// entryBatcher turns chunks of sort record values into Arrow batches of
// the entry schema. The _file columns are built from the ranks at the
// end, into buffers sized once: a builder would grow (and clear) its
// buffer again and again for paths that are most of a batch's bytes.
type entryBatcher struct {
	enc    *recordCodec
	schema *arrow.Schema
	b      *array.RecordBuilder
	ranks  []uint32
	pool   *bufferPool // of the _file columns
	// fields are the builders of b by entry position, nil for _file fields,
	// whose ranks takeRank collects.
	fields   []array.Builder
	takeRank func(field int, v []byte) error
}

func newEntryBatcher(enc *recordCodec, schema *arrow.Schema, mem memory.Allocator, pool *bufferPool) *entryBatcher {
	b := &entryBatcher{enc: enc, schema: schema, b: array.NewRecordBuilder(mem, schema), pool: pool}
	b.fields = make([]array.Builder, schema.NumFields())
	for i := range b.fields {
		if !slices.Contains(enc.filePos, i) {
			b.fields[i] = b.b.Field(i)
		}
	}
	b.takeRank = func(field int, v []byte) error {
		if field != enc.filePos[0] {
			return nil // every _file field holds the same rank
		}
		r, err := enc.rank(v)
		if err != nil {
			return err
		}
		b.ranks = append(b.ranks, r)
		return nil
	}
	return b
}

// decode returns the entries of the values of c as one batch.
func (b *entryBatcher) decode(c *valueChunk) (arrow.RecordBatch, error) {
	b.ranks = b.ranks[:0]
	// Sized once: a builder grown value by value doubles its buffers, each
	// time into fresh memory.
	for _, f := range b.fields {
		if f != nil {
			f.Reserve(len(c.ends))
		}
	}
	start, dataLen := 0, 0
	for _, end := range c.ends {
		if err := b.enc.codec.DecodeValueInto(c.data[start:end], b.fields, b.takeRank); err != nil {
			return nil, err
		}
		start = end
		if len(b.enc.filePos) > 0 {
			dataLen += len(b.enc.paths[b.ranks[len(b.ranks)-1]])
		}
	}
	cols := make([]arrow.Array, b.schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		if b.fields[i] != nil {
			cols[i] = b.fields[i].NewArray()
			continue
		}
		col, err := b.pathColumn(i, dataLen)
		if err != nil {
			return nil, err
		}
		cols[i] = col
	}
	return array.NewRecordBatch(b.schema, cols, int64(len(c.ends))), nil
}

// pathColumn builds column i, a _file field, from the ranks.
func (b *entryBatcher) pathColumn(i, dataLen int) (arrow.Array, error) {
	if b.schema.Field(i).Type.ID() != arrow.STRING || dataLen > math.MaxInt32 {
		fb := b.b.Field(i)
		for _, r := range b.ranks {
			if err := format.AppendValue(fb, b.enc.paths[r]); err != nil {
				return nil, fmt.Errorf("range file entry field %d: %w", b.enc.is.Fields()[i].ID, err)
			}
		}
		return fb.NewArray(), nil
	}
	offBuf, dataBuf := memory.NewResizableBuffer(b.pool), memory.NewResizableBuffer(b.pool)
	defer offBuf.Release()
	defer dataBuf.Release()
	offBuf.Resize(arrow.Int32Traits.BytesRequired(len(b.ranks) + 1))
	dataBuf.Resize(dataLen)
	offsets, data := arrow.Int32Traits.CastFromBytes(offBuf.Bytes()), dataBuf.Bytes()
	offsets[0] = 0
	end := 0
	for j, r := range b.ranks {
		end += copy(data[end:], b.enc.paths[r])
		offsets[j+1] = int32(end)
	}
	// The array holds the buffers, and gives them back to the pool once
	// the range writer has released it.
	col := array.NewData(arrow.BinaryTypes.String, len(b.ranks), []*memory.Buffer{nil, offBuf, dataBuf}, nil, 0, 0)
	defer col.Release()
	return array.NewStringData(col), nil
}

// bufferPool is the allocator of the _file columns a build writes. It
// keeps the buffers of batches the range writer is done with for the next
// batches: the paths are most of the bytes a build writes, and copying them
// into fresh memory each time costs more in page faults than the copy.
// Buffers it hands out are not cleared. It is safe for concurrent use.
//
// A batch asks for two buffers, its offsets and its paths, of sizes that
// differ from batch to batch by a few bytes: a request takes the smallest
// free buffer that holds it, never one more than twice its size (the paths
// of a batch would otherwise go to the next batch's offsets, and each
// paths buffer be new), and new buffers are made a little larger than
// asked (poolClass), so that the next batch's request fits in them.
type bufferPool struct {
	mu   sync.Mutex
	free [][]byte
	max  int
}

func (p *bufferPool) Allocate(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, b := range p.free {
		if c := cap(b); c >= size && c <= 2*size+4096 && (best < 0 || c < cap(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free = slices.Delete(p.free, best, best+1)
		return b[:size]
	}
	return make([]byte, size, poolClass(size))
}

// poolClass is the capacity of a new buffer of size bytes: size rounded up
// to a sixteenth of the power of two at or above it (at least 4 KiB).
func poolClass(size int) int {
	step := max(4096, 1<<bits.Len(uint(size))/16)
	return (size + step - 1) / step * step
}

func (p *bufferPool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	grown := p.Allocate(size)
	copy(grown, b)
	p.Free(b)
	return grown
}

func (p *bufferPool) Free(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < p.max {
		p.free = append(p.free, b[:cap(b)])
	}
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
func (c *recordCodec) rank(s []byte) (uint32, error) {
	if len(s) != rankBytes {
		return 0, fmt.Errorf("decode sort record: file rank of %d bytes", len(s))
	}
	r := binary.BigEndian.Uint32(s)
	if int(r) >= len(c.paths) {
		return 0, fmt.Errorf("decode sort record: file rank %d of %d files", r, len(c.paths))
	}
	return r, nil
}

// recordBuilder holds the buffers of one goroutine's records.
type recordBuilder struct {
	key, val []byte
	rank     []byte // the encoding of the file's rank
}

// add puts the entries of src, rows of plan file file, into sorter and
// returns how many it added.
func (b *recordBuilder) add(c *recordCodec, mem memory.Allocator, src arrow.RecordBatch, file int, sorter *extsort.Sorter) (int64, error) {
	entries, err := format.Entries(mem, c.is, format.RecordColumns(src, c.schema))
	if err != nil {
		return 0, err
	}
	defer entries.Release()
	// The rank that stands in for the file's path, encoded once.
	if b.rank, err = format.AppendValueKey(b.rank[:0], iceberg.PrimitiveTypes.String, c.ranks[file]); err != nil {
		return 0, err
	}
	for i := 0; i < int(entries.NumRows()); i++ {
		if b.key, b.val, err = c.codec.AppendRow(b.key[:0], b.val[:0], entries, i, c.filePos, b.rank); err != nil {
			return 0, err
		}
		if err := sorter.Add(b.key, b.val); err != nil {
			return 0, err
		}
	}
	return entries.NumRows(), nil
}
