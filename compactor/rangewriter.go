package compactor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/objstore"
)

// DefaultTargetFileSize is the range file size that builds and merges aim
// for when none is configured: small enough that a commit touching a few
// keys rewrites little (a merge reads and writes whole range files), large
// enough that a 10M-entry index is tens of files, not thousands. README
// ("Range file size") has the measurements behind it.
const DefaultTargetFileSize = 4 << 20

// DefaultTargetFileEntries is the number of entries range files aim for
// when none is configured, whatever their size: an index of narrow entries
// (a primary key, its file and position) packs millions of them into a few
// MiB, and a commit that changes a few keys would rewrite all of them.
// README ("Range file size") has the measurements behind it.
const DefaultTargetFileEntries = 128 << 10

// RangeWriterOptions tune how entries become range files.
type RangeWriterOptions struct {
	// TargetFileSize is the size range files aim for. A file is closed at
	// the first change of clustering key after it reaches the target, unless
	// what is still to come would make a file under half the target: then
	// it grows up to 1.25 targets, so that builds and merges keep every file
	// between half and one and a half targets (only a run of equal
	// clustering keys, which must share a file, and the last file of an
	// index fall outside). Default: DefaultTargetFileSize (4 MiB).
	TargetFileSize int64
	// TargetFileEntries is the number of entries range files aim for: an
	// entry counts for at least TargetFileSize/TargetFileEntries bytes in
	// every size rule above, so a file reaches its target at whichever of
	// the two it reaches first. Default: DefaultTargetFileEntries.
	TargetFileEntries int64
	// RowGroupRows caps the rows of a Parquet row group. Default: 131072.
	RowGroupRows int
	// PageSizeBytes is the Parquet data page size: smaller pages let
	// lookups skip more through the page index. Default: 64 KiB.
	PageSizeBytes int
	// BatchRows is the number of entries handed to the Parquet writer at
	// once (slices given to AddRows are gathered up to it), and how often
	// the size of the open file is looked at. Default: 32768.
	BatchRows int
	// Store writes the files. Default: a store for local files only.
	Store *objstore.Store
	// Allocator for Arrow buffers. Default: memory.DefaultAllocator.
	Allocator memory.Allocator

	// copyRowGroups lets CopyRowGroup copy row groups as they are; set by
	// a merge of an index whose range files allow it.
	copyRowGroups bool
}

// ConfiguredRangeWriter returns the range file options that cfg sets,
// writing through store.
func ConfiguredRangeWriter(cfg config.BuildConfig, store *objstore.Store) RangeWriterOptions {
	return RangeWriterOptions{TargetFileSize: int64(cfg.TargetFileSize), TargetFileEntries: cfg.TargetFileEntries,
		RowGroupRows: cfg.RowGroupRows, Store: store}
}

func (o *RangeWriterOptions) ensureDefaults() {
	if o.TargetFileSize <= 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if o.TargetFileEntries <= 0 {
		o.TargetFileEntries = DefaultTargetFileEntries
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 128 * 1024
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 32 * 1024
	}
	o.BatchRows = min(o.BatchRows, o.RowGroupRows)
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Store == nil {
		o.Store = objstore.Local()
	}
}

// maxFileSize is the estimated size past which a file is closed at the next
// change of clustering key whatever follows: 1.25 targets, which leaves room
// within the band of 1.5 targets for the estimate to fall short of the
// final size (the footer, the last pages).
func (o *RangeWriterOptions) maxFileSize() int64 { return o.TargetFileSize + o.TargetFileSize/4 }

// minEntrySize is the least an entry counts for against the target size:
// the target's bytes spread over its entries.
func (o *RangeWriterOptions) minEntrySize() float64 {
	return float64(o.TargetFileSize) / float64(o.TargetFileEntries)
}

// weight is what a range file counts for against the target size: its
// bytes, or its entries at minEntrySize each when that is more.
func (o *RangeWriterOptions) weight(e format.TrackingEntry) int64 {
	return max(e.FileSizeInBytes, int64(float64(e.RecordCount)*o.minEntrySize()))
}

// RangeWriter writes entries in cluster order into range files under dir,
// one by one (Add) or as slices of Arrow batches (AddRows), which go to the
// Parquet writer without a conversion per entry. All entries of one
// clustering key share a file. It belongs to one goroutine.
type RangeWriter struct {
	ctx        context.Context
	schema     *format.IndexSchema
	clusterPos []int // positions of the cluster fields in an entry
	dir        string
	opts       RangeWriterOptions

	arrowSchema *arrow.Schema
	builder     *array.RecordBuilder
	pending     int // entries in builder
	// chunks hold the entries given and not yet written, in order: slices
	// from AddRows and batches of the builder's entries. They go to the
	// Parquet writer as one batch of about BatchRows entries: a write costs
	// a fixed setup per column, which a merge of uniformly spread changes,
	// passing on a few rows between two changed keys, would otherwise pay
	// for every few rows.
	chunks    []arrow.RecordBatch
	chunkRows int
	// dense decodes, by column, the dictionaries of the queued chunks:
	// two sets, one for the batch being written and one for the next.
	dense [2][]denseBuffers
	flip  int
	// inflight, when set, delivers the result of the write of the last
	// batch, which runs beside the caller's work on the next one (a merge
	// decodes and merges while the batch before is encoded and
	// compressed); inflightRows is the file's entries once it is done.
	inflight     chan error
	inflightRows int64
	werr         error // the first write that failed
	// closing, when set, delivers the end of the close of the last file
	// finished (finishFile); files counts the files finished.
	closing chan closedFile
	files   int
	// beforeWrite, when set (by tests), runs on the write's goroutine
	// before the write.
	beforeWrite func()

	// remaining, when set, estimates the entries still to come after those
	// given so far; it lets the writer avoid leaving a small last file.
	remaining func() int64
	// entrySize, when set, is the expected size of an entry in a range file,
	// footer included: set by a merge from the files it replaces, and
	// learned from each file the writer closes.
	entrySize float64
	// afterSplit, when set, is called each time Add or AddRows closed a file
	// and the entries that follow start the next one.
	afterSplit func()

	out  *objstore.Writer
	file *format.RangeFileWriter
	rows int64 // entries given to the open file's writer
	size int64 // its estimated size once sizedRows were written
	// sizedRows are the entries written when size was taken: the sizes
	// are taken when a write is waited for, before the next begins, so
	// that where files split does not depend on how fast writes run.
	sizedRows int64
	// copiedRows and copiedBytes are the entries and chunk bytes of the
	// row groups copied into the open file (CopyRowGroup), which size and
	// sizedRows leave out: the bytes per entry of a row group copied from
	// another file say nothing of the entries written.
	copiedRows, copiedBytes int64
	lastKey                 format.Key // clustering key of the last entry added
	keyBuf                  format.Key
	written                 []format.TrackingEntry
	bytes                   int64
	closed                  bool
}

// NewRangeWriter writes range files named <dir>/<uuid>.parquet.
func NewRangeWriter(ctx context.Context, s *format.IndexSchema, dir string, opts RangeWriterOptions) (*RangeWriter, error) {
	opts.ensureDefaults()
	as, err := format.ArrowSchema(s.EntrySchema())
	if err != nil {
		return nil, err
	}
	w := &RangeWriter{ctx: ctx, schema: s, dir: dir, opts: opts, arrowSchema: as,
		dense: [2][]denseBuffers{spareDense.take(as.NumFields()), spareDense.take(as.NumFields())}}
	pos := map[int]int{}
	for i, f := range s.Fields() {
		pos[f.ID] = i
	}
	for _, f := range s.ClusterFields() {
		w.clusterPos = append(w.clusterPos, pos[f.ID])
	}
	w.builder = array.NewRecordBuilder(opts.Allocator, as)
	return w, nil
}

// Add appends one entry (values in EntrySchema order). Entries must come in
// cluster order; the range file writer refuses anything else. The writer
// keeps the entry's key until the next one: its strings must be the
// caller's own, not views of a batch's buffers (a merge's entries are:
// decoded from the delta, or copied with ownValue).
func (w *RangeWriter) Add(entry format.Key) error {
	w.keyBuf = w.keyBuf[:0]
	for _, p := range w.clusterPos {
		w.keyBuf = append(w.keyBuf, entry[p])
	}
	if w.shouldClose(1) && format.CompareKeys(w.schema.ClusterTypes(), w.lastKey, w.keyBuf) != 0 {
		if err := w.split(); err != nil {
			return err
		}
	}
	for i, v := range entry {
		if err := format.AppendValue(w.builder.Field(i), v); err != nil {
			return fmt.Errorf("range file entry field %d: %w", w.schema.Fields()[i].ID, err)
		}
	}
	w.lastKey = append(w.lastKey[:0], w.keyBuf...)
	w.pending++
	if w.queued() >= w.opts.BatchRows {
		return w.flushBatch()
	}
	return nil
}

// queued is the number of entries given and not yet written.
func (w *RangeWriter) queued() int { return w.pending + w.chunkRows }

// AddRows appends rows [from, to) of rec, a batch of entries with the
// columns of ArrowSchema(EntrySchema) in EntrySchema order (a string or
// binary column may be a dictionary of its type), after the entries given
// before. The rows go to the Parquet writer as slices of rec,
// gathered with what comes before and after them up to BatchRows entries;
// the writer holds a reference to rec until then.
func (w *RangeWriter) AddRows(rec arrow.RecordBatch, from, to int) error {
	if from >= to {
		return nil
	}
	for from < to {
		if w.shouldClose(int64(to - from)) {
			// Entries of the last key written stay in the open file.
			same := from
			for same < to && w.compareRow(rec, same) == 0 {
				same++
			}
			if err := w.writeRows(rec, from, same); err != nil {
				return err
			}
			if from = same; from == to {
				return nil
			}
			if err := w.split(); err != nil {
				return err
			}
		}
		end := min(from+w.opts.BatchRows, to)
		if err := w.writeRows(rec, from, end); err != nil {
			return err
		}
		from = end
	}
	return nil
}

// CopyRowGroup appends row group g of r, of rows entries, which must come
// after the entries given so far, without decoding it
// (format.RangeFileWriter.CopyRowGroup). A row group cannot be cut, so it
// is copied only where the size rules (shouldClose) would not cut the
// entries given one by one before its end: the open file, with it, stays
// within the target, and when what is still to come does not fit in the
// file, the even split of the two lies past it. It reports false, having
// written nothing, when the row group is not copied: the caller then gives
// its entries through AddRows, and the writer cuts them where the rules
// say.
func (w *RangeWriter) CopyRowGroup(r *format.RangeFileReader, g int, rows int64) (bool, error) {
	if !w.opts.copyRowGroups || rows < minCopiedRows || w.shouldClose(0) {
		return false, nil
	}
	_, open := w.open()
	// Page indexes and the footer add about an eighth to the chunks.
	chunks := r.RowGroupBytes(g)
	size := max(chunks+chunks/8, int64(w.opts.minEntrySize()*float64(rows)))
	rest := size // the row group and what follows it
	if w.remaining != nil {
		rest = max(rest, int64(w.perEntry()*float64(w.remaining())))
	}
	if open+size > w.opts.TargetFileSize || open+rest > w.opts.maxFileSize() && 2*(open+size) > open+rest {
		return false, nil
	}
	if err := w.flushBatch(); err != nil {
		return false, err
	}
	if err := w.wait(); err != nil {
		return false, err
	}
	if w.file == nil {
		if err := w.openFile(); err != nil {
			return false, err
		}
	}
	if err := w.file.CopyRowGroup(w.ctx, r, g); err != nil {
		if errors.Is(err, format.ErrCannotCopyRowGroup) {
			return false, nil
		}
		return false, err
	}
	w.rows += rows
	w.copiedRows, w.copiedBytes = w.copiedRows+rows, w.file.CopiedBytes()
	w.lastKey = append(w.lastKey[:0], w.file.LastKey()...)
	return true, nil
}

// minCopiedRows is the fewest entries a row group must hold to be copied:
// decoding fewer costs about what copying does.
const minCopiedRows = 16

// compareRow compares the clustering key of row i of rec with the last one
// written.
func (w *RangeWriter) compareRow(rec arrow.RecordBatch, i int) int {
	if w.lastKey == nil {
		return 1
	}
	w.rowKey(rec, i)
	return format.CompareKeys(w.schema.ClusterTypes(), w.keyBuf, w.lastKey)
}

// rowKey sets keyBuf to the clustering key of row i of rec.
func (w *RangeWriter) rowKey(rec arrow.RecordBatch, i int) {
	w.keyBuf = w.keyBuf[:0]
	for n, p := range w.clusterPos {
		w.keyBuf = append(w.keyBuf, format.ValueAtAs(w.schema.ClusterTypes()[n], rec.Column(p), i))
	}
}

// writeRows queues rows [from, to) of rec for the open file, and writes
// what is queued once it reaches BatchRows entries.
func (w *RangeWriter) writeRows(rec arrow.RecordBatch, from, to int) error {
	if from >= to {
		return nil
	}
	w.builderChunk()
	var part arrow.RecordBatch
	if from > 0 || to < int(rec.NumRows()) {
		part = rec.NewSlice(int64(from), int64(to))
	} else {
		rec.Retain()
		part = rec
	}
	w.chunks = append(w.chunks, part)
	w.chunkRows += to - from
	w.rowKey(rec, to-1)
	w.lastKey = keepKey(w.lastKey, w.keyBuf)
	if w.queued() >= w.opts.BatchRows {
		return w.flushBatch()
	}
	return nil
}

// keepKey copies key into dst, with strings of their own (ownValue): a
// batch's string values share its buffers, which go back to a pool or to
// the next batch once the batch is written, while the last key is kept
// until the next entries come.
func keepKey(dst, key format.Key) format.Key {
	dst = dst[:0]
	for _, v := range key {
		dst = append(dst, ownValue(v))
	}
	return dst
}

// builderChunk moves the builder's entries to the queue, behind the chunks
// given before them.
func (w *RangeWriter) builderChunk() {
	if w.pending == 0 {
		return
	}
	w.chunks = append(w.chunks, w.builder.NewRecordBatch())
	w.chunkRows += w.pending
	w.pending = 0
}

// dropChunks releases the queued chunks.
func (w *RangeWriter) dropChunks() {
	for _, c := range w.chunks {
		c.Release()
	}
	clear(w.chunks)
	w.chunks, w.chunkRows = w.chunks[:0], 0
}

// queuedBatch joins the queued chunks into one batch of the entry schema
// (the caller releases it): string and binary columns given as
// dictionaries are decoded here, each value copied once into the joined
// column, in buffers the writer reuses (the batch is good until the next
// call but one: the two sets of buffers take turns).
func (w *RangeWriter) queuedBatch() (arrow.RecordBatch, error) {
	if len(w.chunks) == 1 && w.chunks[0].Schema().Equal(w.arrowSchema) {
		w.chunks[0].Retain()
		return w.chunks[0], nil
	}
	cols := make([]arrow.Array, w.arrowSchema.NumFields())
	defer releaseAll(cols)
	parts := make([]arrow.Array, len(w.chunks))
	for i := range cols {
		dict := false
		for j, c := range w.chunks {
			parts[j] = c.Column(i)
			_, isDict := parts[j].(*array.Dictionary)
			dict = dict || isDict
		}
		var col arrow.Array
		var err error
		switch {
		case dict:
			col, err = w.dense[w.flip][i].join(w.arrowSchema.Field(i).Type, parts, nil)
		case len(parts) == 1:
			col = parts[0]
			col.Retain()
		default:
			col, err = array.Concatenate(parts, w.opts.Allocator)
		}
		if err != nil {
			return nil, fmt.Errorf("join range file entries of field %d: %w", w.schema.Fields()[i].ID, err)
		}
		cols[i] = col
	}
	return array.NewRecordBatch(w.arrowSchema, cols, int64(w.chunkRows)), nil
}

// denseColumn joins parts, string or binary arrays of type typ or
// dictionaries of it, into one plain array of type typ, sized before the
// values are copied.
func denseColumn(mem memory.Allocator, typ arrow.DataType, parts []arrow.Array) (arrow.Array, error) {
	var scratch denseBuffers
	return scratch.join(typ, parts, mem)
}

// denseBuffers hold the offsets and values of a decoded column. A range
// writer keeps them from one batch to the next: the Parquet writer copies
// what it keeps of a batch (encoded pages, dictionary entries, statistics)
// before Write returns, and decoding a column of long paths into fresh
// buffers on every batch costs more in allocation than in copying.
type denseBuffers struct {
	offsets []int32
	data    []byte
	valid   []byte
	values  [][]byte // scratch: the values of the parts' dictionaries, one after another
	keys    []int32  // scratch: each dictionary row's index into values, -1 for null
}

// join decodes parts into an array of type typ. With mem nil the array's
// buffers are b's own, valid until the next join; otherwise they are
// allocated from mem. A plain part's values are copied as one block and its
// offsets moved; a dictionary's indexes are read once, with one type switch
// per part rather than one per row.
func (b *denseBuffers) join(typ arrow.DataType, parts []arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	switch typ.ID() {
	case arrow.STRING, arrow.BINARY:
	default:
		return nil, fmt.Errorf("decode dictionary into %s: not a string or binary type", typ)
	}
	// The dictionaries' rows and the size of the joined values first: a
	// writer starts with empty buffers, and growing them by appending would
	// copy the first batches' values several times.
	b.values, b.keys = b.values[:0], b.keys[:0]
	rows, size, nulls := 0, 0, 0
	for _, p := range parts {
		rows += p.Len()
		d, isDict := p.(*array.Dictionary)
		if !isDict {
			off, _, err := plainBinary(p)
			if err != nil {
				return nil, err
			}
			size += int(off[len(off)-1] - off[0])
			nulls += p.NullN()
			continue
		}
		base := len(b.values)
		dict := d.Dictionary()
		for k := range dict.Len() {
			v, _ := binaryValueAt(dict, k)
			b.values = append(b.values, v)
		}
		var err error
		if b.keys, err = appendDictionaryKeys(b.keys, d, base); err != nil {
			return nil, err
		}
	}
	for _, k := range b.keys {
		if k < 0 {
			nulls++
			continue
		}
		size += len(b.values[k])
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("decode dictionary into %s: %d bytes of values do not fit 32-bit offsets", typ, size)
	}
	b.offsets = append(slices.Grow(b.offsets[:0], rows+1), 0)
	b.data = slices.Grow(b.data[:0], size)
	b.valid = b.valid[:0]
	if nulls > 0 {
		b.valid = append(b.valid, make([]byte, bitutil.BytesForBits(int64(rows)))...)
	}
	row, key := 0, 0
	for _, p := range parts {
		n := p.Len()
		if _, isDict := p.(*array.Dictionary); isDict {
			for _, k := range b.keys[key : key+n] {
				if k >= 0 {
					b.data = append(b.data, b.values[k]...)
					if nulls > 0 {
						bitutil.SetBit(b.valid, row)
					}
				}
				b.offsets = append(b.offsets, int32(len(b.data)))
				row++
			}
			key += n
			continue
		}
		off, data, _ := plainBinary(p)
		shift := int32(len(b.data)) - off[0]
		b.data = append(b.data, data[off[0]:off[n]]...)
		for _, o := range off[1:] {
			b.offsets = append(b.offsets, o+shift)
		}
		if nulls > 0 {
			for i := range n {
				if p.IsValid(i) {
					bitutil.SetBit(b.valid, row+i)
				}
			}
		}
		row += n
	}
	clear(b.values) // the dictionaries' buffers are the batches', not b's
	offsets := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b.offsets))), 4*len(b.offsets))
	buffers := []*memory.Buffer{nil, memory.NewBufferBytes(offsets), memory.NewBufferBytes(b.data)}
	if nulls > 0 {
		buffers[0] = memory.NewBufferBytes(b.valid)
	}
	if mem != nil {
		for i, buf := range buffers {
			if buf != nil {
				owned := memory.NewResizableBuffer(mem)
				owned.Resize(buf.Len())
				copy(owned.Bytes(), buf.Bytes())
				buffers[i] = owned
				defer owned.Release()
			}
		}
	}
	data := array.NewData(typ, rows, buffers, nil, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// plainBinary returns the offsets of a string or binary array's rows
// (Len()+1 of them, into data, as the Arrow columnar format lays them out:
// a slice of an array starts at its offset) and its values buffer.
func plainBinary(a arrow.Array) ([]int32, []byte, error) {
	switch a.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
	default:
		return nil, nil, fmt.Errorf("decode %s into a string or binary column: not a string or binary array", a.DataType())
	}
	d := a.Data()
	bufs := d.Buffers()
	var data []byte
	if len(bufs) > 2 && bufs[2] != nil {
		data = bufs[2].Bytes()
	}
	if a.Len() == 0 || len(bufs) < 2 || bufs[1] == nil {
		return []int32{0}, data, nil
	}
	raw := bufs[1].Bytes()
	all := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)/4)
	return all[d.Offset() : d.Offset()+a.Len()+1], data, nil
}

// appendDictionaryKeys appends, for each row of d, base plus the index of
// its value in d's dictionary, or -1 where the row or its value is null.
func appendDictionaryKeys(keys []int32, d *array.Dictionary, base int) ([]int32, error) {
	idx := d.Indices()
	var err error
	switch a := idx.(type) {
	case *array.Int8:
		keys, err = appendKeysOf(keys, d, a.Int8Values(), base)
	case *array.Int16:
		keys, err = appendKeysOf(keys, d, a.Int16Values(), base)
	case *array.Int32:
		keys, err = appendKeysOf(keys, d, a.Int32Values(), base)
	case *array.Int64:
		keys, err = appendKeysOf(keys, d, a.Int64Values(), base)
	case *array.Uint8:
		keys, err = appendKeysOf(keys, d, a.Uint8Values(), base)
	case *array.Uint16:
		keys, err = appendKeysOf(keys, d, a.Uint16Values(), base)
	case *array.Uint32:
		keys, err = appendKeysOf(keys, d, a.Uint32Values(), base)
	case *array.Uint64:
		keys, err = appendKeysOf(keys, d, a.Uint64Values(), base)
	default:
		return nil, fmt.Errorf("decode dictionary: indexes of type %s", idx.DataType())
	}
	return keys, err
}

func appendKeysOf[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64](keys []int32, d *array.Dictionary, raw []T, base int) ([]int32, error) {
	dict, idx := d.Dictionary(), d.Indices()
	n := uint64(dict.Len())
	nullable := idx.NullN() > 0 || dict.NullN() > 0
	for i, k := range raw {
		switch {
		case nullable && idx.IsNull(i):
			keys = append(keys, -1)
		case uint64(k) >= n: // a negative index too, as a large unsigned one
			return nil, fmt.Errorf("decode dictionary: row %d has index %d, the dictionary holds %d values", i, k, n)
		case nullable && dict.IsNull(int(k)):
			keys = append(keys, -1)
		default:
			keys = append(keys, int32(base+int(k)))
		}
	}
	return keys, nil
}

// spareDense keeps the decode buffers of range writers that closed for the
// writers that open next. A daemon's update opens a writer per changed part
// of the index, and a column of file paths joined into fresh buffers costs
// more in zeroing and faulting in new memory than in copying the values
// (a quarter of the updates' CPU in a daemon that also answered lookups,
// whose allocations keep the heap from holding freed memory).
var spareDense = denseSpares{limit: 64 << 20}

// denseSpares is a free list of per-column buffer sets holding at most
// limit bytes of capacity; a set beyond it is left to the collector.
type denseSpares struct {
	mu    sync.Mutex
	sets  [][]denseBuffers
	bytes int
	limit int
}

// take returns a set of n column buffers, kept ones when it has a set of
// that width.
func (s *denseSpares) take(n int) []denseBuffers {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.sets) - 1; i >= 0; i-- {
		if set := s.sets[i]; len(set) == n {
			s.sets = slices.Delete(s.sets, i, i+1)
			s.bytes -= denseCapacity(set)
			return set
		}
	}
	return make([]denseBuffers, n)
}

// put keeps set for a later take, unless that would pass the limit.
func (s *denseSpares) put(set []denseBuffers) {
	if set == nil {
		return
	}
	size := denseCapacity(set)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+size > s.limit {
		return
	}
	for i := range set {
		clear(set[i].values)
	}
	s.sets = append(s.sets, set)
	s.bytes += size
}

// denseCapacity is the bytes the buffers of set hold.
func denseCapacity(set []denseBuffers) int {
	n := 0
	for _, b := range set {
		n += 4*cap(b.offsets) + cap(b.data) + cap(b.valid) + 24*cap(b.values)
	}
	return n
}

// binaryValueAt returns the bytes of row i of a string or binary array, or
// of a dictionary of one, and false for a null.
func binaryValueAt(a arrow.Array, i int) ([]byte, bool) {
	if a.IsNull(i) {
		return nil, false
	}
	if d, ok := a.(*array.Dictionary); ok {
		return binaryValueAt(d.Dictionary(), d.GetValueIndex(i))
	}
	switch a := a.(type) {
	case *array.String:
		s := a.Value(i)
		return unsafe.Slice(unsafe.StringData(s), len(s)), true
	case *array.Binary:
		return a.Value(i), true
	}
	panic(fmt.Sprintf("compactor: %s is not a string or binary array", a.DataType()))
}

// shouldClose decides, before the next entries (of which the caller holds
// ahead), whether to close the open file at the next change of clustering
// key. A file closes once it reaches the target, unless what is still to
// come (ahead, and what remaining estimates) would then make a file under
// half the target and both fit in one and a half targets; and a file of at
// least half the target closes early when the rest will not fit in it but
// is no larger than it, so that the two split evenly. Past one and a half
// targets it closes whatever follows.
func (w *RangeWriter) shouldClose(ahead int64) bool {
	rows := w.rows + int64(w.queued())
	if w.file == nil || w.rows == 0 || w.lastKey == nil {
		return false
	}
	target, limit := w.opts.TargetFileSize, w.opts.maxFileSize()
	size := w.estimate(rows)
	if size >= limit {
		return true
	}
	if w.remaining == nil {
		return size >= target
	}
	rest := int64(w.perEntry() * float64(ahead+w.remaining()))
	if size >= target {
		return rest >= target/2 || size+rest > limit
	}
	return size+rest > limit && size >= rest && size >= target/2
}

// perEntry is the estimated size of an entry of the open file: its size
// over the entries written when it was taken; before any was, what a file
// of this writer (or those the merge replaces) took, and when there is no
// such file, the size after the first write, waited for.
func (w *RangeWriter) perEntry() float64 {
	if w.sizedRows == 0 && w.entrySize == 0 {
		_ = w.wait() // an error stays for the next flush to return
	}
	if w.sizedRows == 0 {
		return max(w.entrySize, w.opts.minEntrySize())
	}
	return max(float64(w.size)/float64(w.sizedRows), w.opts.minEntrySize())
}

// wait waits for the write in flight and takes the open file's size; it
// returns the error of that write or of one before.
func (w *RangeWriter) wait() error {
	if w.inflight == nil {
		return w.werr
	}
	err := <-w.inflight
	w.inflight = nil
	if err != nil {
		w.werr = fmt.Errorf("write range file %s: %w", w.out.Location(), err)
		return w.werr
	}
	// The Parquet writer counts only the pages it has compressed, not the
	// dictionaries and the page it is filling, nor the footer it writes at
	// the close; the bytes per entry of whole files (the files a merge
	// replaces, or those this writer closed) count all of it.
	w.sizedRows = w.inflightRows - w.copiedRows
	w.size = max(w.file.EstimatedSize()-w.copiedBytes, int64(w.entrySize*float64(w.sizedRows)))
	return nil
}

// split closes the open file between two entries and reports it.
func (w *RangeWriter) split() error {
	if err := w.finishFile(); err != nil {
		return err
	}
	if w.afterSplit != nil {
		w.afterSplit()
	}
	return nil
}

// flushBatch hands the queued entries to the open range file, opening one
// when needed: once the write before has finished, the batch is written on
// a goroutine of its own while the caller goes on.
func (w *RangeWriter) flushBatch() error {
	w.builderChunk()
	if w.chunkRows == 0 {
		return nil
	}
	if w.file == nil {
		if err := w.openFile(); err != nil {
			return err
		}
	}
	rec, err := w.queuedBatch()
	if err != nil {
		return err
	}
	w.rows += int64(w.chunkRows)
	w.dropChunks()
	// The batch is checked and counted in the file's statistics here,
	// while the batch before is being encoded: the encoding is what the
	// writer waits for.
	p, perr := w.file.Prepare(rec)
	rec.Release()
	if err := w.wait(); err != nil {
		if p != nil {
			p.Release()
		}
		return err
	}
	if perr != nil {
		w.werr = fmt.Errorf("write range file %s: %w", w.out.Location(), perr)
		return w.werr
	}
	w.flip ^= 1
	file, done, before := w.file, make(chan error, 1), w.beforeWrite
	w.inflight, w.inflightRows = done, w.rows
	go func() {
		if before != nil {
			before()
		}
		done <- file.WritePrepared(p)
	}()
	return nil
}

// drain waits for the write in flight, if any, whatever its result.
func (w *RangeWriter) drain() {
	if w.inflight != nil {
		<-w.inflight
		w.inflight = nil
	}
}

func (w *RangeWriter) openFile() error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("name range file: %w", err)
	}
	out, err := w.opts.Store.Create(w.ctx, objstore.Join(w.dir, id.String()+".parquet"), objstore.CreateOptions{})
	if err != nil {
		return err
	}
	f, err := format.NewRangeFileWriter(out, w.schema, format.RangeFileOptions{RowGroupRows: w.opts.RowGroupRows, PageSizeBytes: w.opts.PageSizeBytes, Allocator: w.opts.Allocator,
		CopyRowGroups: w.opts.copyRowGroups})
	if err != nil {
		out.Abort()
		return fmt.Errorf("start range file %s: %w", out.Location(), err)
	}
	w.out, w.file, w.size, w.rows, w.sizedRows, w.copiedRows, w.copiedBytes = out, f, 0, 0, 0, 0, 0
	return nil
}

// finishFile ends the open file: its last batch is written, and its close
// (the row group's last pages compressed, dictionaries, page indexes and
// footer written, the file published) runs on a goroutine of its own beside
// the writes of the next file; the close of the file before is waited for
// first, so at most one is in flight. Close and the next finishFile report
// its failure.
func (w *RangeWriter) finishFile() error {
	if err := w.flushBatch(); err != nil {
		return err
	}
	if err := w.wait(); err != nil {
		return err
	}
	if w.file == nil {
		return nil
	}
	if err := w.waitClose(); err != nil {
		return err
	}
	file, out, done := w.file, w.out, make(chan closedFile, 1)
	w.file, w.out, w.size, w.rows, w.sizedRows, w.copiedRows, w.copiedBytes = nil, nil, 0, 0, 0, 0, 0
	w.files++
	w.closing = done
	go func() {
		entry, err := file.Close()
		if err != nil {
			out.Abort()
			done <- closedFile{err: fmt.Errorf("finish range file %s: %w", out.Location(), err)}
			return
		}
		if err := out.Close(); err != nil {
			done <- closedFile{err: err}
			return
		}
		entry.FilePath = out.Location()
		done <- closedFile{entry: entry}
	}()
	return nil
}

// closedFile is the end of a file's close.
type closedFile struct {
	entry format.TrackingEntry
	err   error
}

// waitClose waits for the close in flight, if any, and adds the file to
// those written.
func (w *RangeWriter) waitClose() error {
	if w.closing == nil {
		return nil
	}
	c := <-w.closing
	w.closing = nil
	if c.err != nil {
		return c.err
	}
	if c.entry.RecordCount > 0 {
		// Later files of this writer are estimated at the bytes per
		// entry of this one, footer included.
		w.entrySize = float64(c.entry.FileSizeInBytes) / float64(c.entry.RecordCount)
	}
	w.bytes += c.entry.FileSizeInBytes
	w.written = append(w.written, c.entry)
	return nil
}

// open returns the entries given since the last file was closed and an
// estimate of the size they take.
func (w *RangeWriter) open() (rows, size int64) {
	rows = w.rows + int64(w.queued())
	if w.file == nil || w.rows == 0 {
		return rows, 0
	}
	return rows, w.estimate(rows)
}

// estimate is the size of the open file once it holds rows entries: the
// row groups copied into it (at minEntrySize an entry at the least), and
// the other entries at perEntry each.
func (w *RangeWriter) estimate(rows int64) int64 {
	copied := max(w.copiedBytes, int64(w.opts.minEntrySize()*float64(w.copiedRows)))
	return copied + int64(w.perEntry()*float64(rows-w.copiedRows))
}

// Close finishes the last file and returns the tracking entries of every
// file written, in cluster order.
func (w *RangeWriter) Close() ([]format.TrackingEntry, error) {
	defer w.release()
	err := w.finishFile()
	if cerr := w.waitClose(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return w.written, nil
}

// Abort drops the open file. Files already finished stay: the caller deletes
// them, or leaves them to orphan clean-up, since no snapshot references them.
func (w *RangeWriter) Abort() {
	w.drain()
	if w.out != nil {
		w.out.Abort()
		w.out, w.file = nil, nil
	}
	w.release()
}

func (w *RangeWriter) release() {
	w.drain()
	_ = w.waitClose() // a file finished stays in Written for the caller to remove
	if !w.closed {
		w.closed = true
		w.dropChunks()
		w.builder.Release()
		// No write is in flight any more: nothing reads the buffers.
		for i, set := range w.dense {
			spareDense.put(set)
			w.dense[i] = nil
		}
	}
}

// Written returns the tracking entries of the files finished so far (the
// one being closed once Close or Abort has returned).
func (w *RangeWriter) Written() []format.TrackingEntry { return w.written }

// Files counts the files finished so far, the one being closed included.
func (w *RangeWriter) Files() int { return w.files }

// BytesWritten is the size of the files finished so far.
func (w *RangeWriter) BytesWritten() int64 { return w.bytes }
