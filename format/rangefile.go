package format

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
)

// Range files are Parquet files that are valid Iceberg data files: every
// column carries its index field ID as the Parquet field_id and has the type
// Iceberg's Parquet mapping gives (decimals as int32, int64 or the smallest
// fixed_len_byte_array by precision; uuid as fixed_len_byte_array(16) with
// the UUID logical type; timestamps with their unit and isAdjustedToUTC).
// Rows are in clustering order. Column and page statistics, page indexes and
// the sorting_columns of the row groups let any Parquet reader skip what a
// lookup does not need.

// ErrOutOfOrder is returned (wrapped, with both keys) by RangeFileWriter.Write
// for an entry whose clustering key is lower than the one before it. The
// entry is not written: a caller that sorts its entries never sees it, so it
// means a bug upstream.
var ErrOutOfOrder = errors.New("clustering key out of order")

// RangeFileOptions tune the Parquet layout of range files. The zero value
// selects the defaults.
type RangeFileOptions struct {
	// RowGroupRows caps the rows of one row group: the unit that readers skip
	// by statistics and that the writer holds in memory. Default 128*1024.
	RowGroupRows int
	// PageSizeBytes is the target size of a data page, the unit that readers
	// skip through the page index: small pages make point lookups decode
	// little. Default 64 KiB.
	PageSizeBytes int
	// Compression is the codec of data and dictionary pages. The zero value,
	// compress.Codecs.Uncompressed, selects the default, so range files are
	// always compressed. Default compress.Codecs.Zstd.
	Compression compress.Compression
	// CompressionLevel is the codec's level. Range files are written again
	// on every commit that touches them, so the default favours speed:
	// zstd's fastest level, which on index entries compresses about as well
	// as its default one. Default 1.
	CompressionLevel int
	// Allocator allocates the writer's buffers. Default memory.DefaultAllocator.
	Allocator memory.Allocator
	// CopyRowGroups lets the writer take row groups of other range files
	// as they are (CopyRowGroup): it then holds the file in memory until
	// Close, which lays out the row groups written and copied in order.
	CopyRowGroups bool
}

func (o RangeFileOptions) withDefaults() (RangeFileOptions, error) {
	if o.RowGroupRows < 0 || o.PageSizeBytes < 0 {
		return o, fmt.Errorf("range file options: negative RowGroupRows (%d) or PageSizeBytes (%d)", o.RowGroupRows, o.PageSizeBytes)
	}
	if o.RowGroupRows == 0 {
		o.RowGroupRows = 128 * 1024
	}
	if o.PageSizeBytes == 0 {
		o.PageSizeBytes = 64 << 10
	}
	if o.Compression == compress.Codecs.Uncompressed {
		o.Compression = compress.Codecs.Zstd
	}
	if o.CompressionLevel == 0 {
		o.CompressionLevel = 1
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	return o, nil
}

// RangeFileWriter writes the entries of one range file and gathers the
// content statistics of its tracking file entry as it goes. It buffers at
// most one row group. It is not safe for concurrent use.
type RangeFileWriter struct {
	schema  *IndexSchema
	entries *arrow.Schema // what Write takes
	stored  *arrow.Schema // what the file holds
	// posByID maps a field ID to its position in entries.
	posByID map[int]int
	// storedPos[i] is the position in entries of stored column i.
	storedPos []int
	// clusterPos[i] is the position in entries of cluster field i.
	clusterPos []int
	sink       *countingWriter
	fw         *pqarrow.FileWriter
	acc        []statsAccumulator // by position in entries
	rows       int64
	lastKey    Key
	// prepared counts the entries Prepare took in; rows those written,
	// WritePrepared's (the two run on different goroutines).
	prepared int64
	err      error // a failure of the Parquet writer; the file is lost
	closed   bool
	copies   *rowGroupCopies // with RangeFileOptions.CopyRowGroups
}

// NewRangeFileWriter writes entries to w. Input batches have the Arrow schema
// of ArrowSchema(s.EntrySchema()), matched by field ID; non-materialized
// columns are used only for statistics and not written. Close finishes the
// file but does not close w.
func NewRangeFileWriter(w io.Writer, s *IndexSchema, opts RangeFileOptions) (*RangeFileWriter, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	entries, err := ArrowSchema(s.EntrySchema())
	if err != nil {
		return nil, err
	}
	stored, err := ArrowSchema(s.StoredSchema())
	if err != nil {
		return nil, err
	}
	rw := &RangeFileWriter{
		schema:  s,
		entries: entries,
		stored:  stored,
		sink:    &countingWriter{w: w},
		posByID: map[int]int{},
		acc:     make([]statsAccumulator, entries.NumFields()),
	}
	if opts.CopyRowGroups {
		rw.copies = &rowGroupCopies{out: w}
		rw.sink.w = &rw.copies.buf
	}
	for i, f := range entries.Fields() {
		id, _ := arrowFieldID(f)
		rw.posByID[id] = i
		fld, _ := s.Field(id)
		rw.acc[i].typ = fld.Type
	}
	for _, f := range stored.Fields() {
		id, _ := arrowFieldID(f)
		rw.storedPos = append(rw.storedPos, rw.posByID[id])
	}
	for _, f := range s.ClusterFields() {
		rw.clusterPos = append(rw.clusterPos, rw.posByID[f.ID])
	}

	props := []parquet.WriterProperty{
		parquet.WithAllocator(opts.Allocator),
		parquet.WithCompression(opts.Compression),
		parquet.WithCompressionLevel(opts.CompressionLevel),
		parquet.WithMaxRowGroupLength(int64(opts.RowGroupRows)),
		parquet.WithDataPageSize(int64(opts.PageSizeBytes)),
		parquet.WithStats(true),
		parquet.WithPageIndexEnabled(true),
		parquet.WithStoreDecimalAsInteger(true),
		parquet.WithDictionaryDefault(true),
		parquet.WithSortingColumns(sortingColumns(s, stored)),
	}
	for _, f := range stored.Fields() {
		switch f.Type.ID() {
		case arrow.FLOAT32, arrow.FLOAT64:
			// arrow-go's dictionary encoder folds every NaN into the first
			// one seen, losing the sign that orders -NaN first and NaN last.
			props = append(props, parquet.WithDictionaryFor(f.Name, false))
		case arrow.INT32, arrow.INT64, arrow.DATE32, arrow.TIME64, arrow.TIMESTAMP:
			if id, _ := arrowFieldID(f); !s.IsCluster(id) {
				// Integers that lookups do not seek by (`_pos`, carried
				// values) as DELTA_BINARY_PACKED: the positions of a data
				// file's rows are steps of one, a few bits a value before zstd
				// has any work, and values in no order cost about what plain
				// ones do after zstd. Cluster fields stay in pages of
				// PageSizeBytes that the page index lets a lookup pick: a
				// delta-encoded page is decoded from its start, and a sorted
				// key packs so tight that a row group is one page (a cold
				// point lookup at 10M then took 1.45-1.68 ms against 1.01-1.21).
				// On the pk index of 10M orders: 12.6 MiB against 22.4, an
				// update of 0.1% of keys spread uniformly 1.99 s against
				// 2.40-2.46, point lookups as before (streamidx bench --scale
				// medium --only incremental,lookup.point, 2026-12-04).
				props = append(props, parquet.WithDictionaryFor(f.Name, false), parquet.WithEncodingFor(f.Name, parquet.Encodings.DeltaBinaryPacked))
				break
			}
			props = append(props, parquet.WithDictionaryCostFallbackFor(f.Name, true))
		default:
			// Keep a dictionary only while it pays for itself, as parquet-mr does.
			props = append(props, parquet.WithDictionaryCostFallbackFor(f.Name, true))
		}
	}
	wprops, aprops := parquet.NewWriterProperties(props...), pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(opts.Allocator))
	if rw.copies != nil {
		rw.copies.props, rw.copies.aprops = wprops, aprops
	}
	rw.fw, err = pqarrow.NewFileWriter(stored, rw.sink, wprops, aprops)
	if err != nil {
		return nil, fmt.Errorf("create range file writer: %w", err)
	}
	return rw, nil
}

// sortingColumns declares the order of the rows for Parquet readers: the
// stored cluster fields up to the first one that is not stored (the rows are
// sorted by a prefix of the key only) or is a float or double (Parquet
// readers do not share the spec's order of NaN and signed zeros).
func sortingColumns(s *IndexSchema, stored *arrow.Schema) []parquet.SortingColumn {
	var out []parquet.SortingColumn
	for _, f := range s.ClusterFields() {
		idx := -1
		for i, sf := range stored.Fields() {
			if id, _ := arrowFieldID(sf); id == f.ID {
				idx = i
			}
		}
		switch f.Type.(type) {
		case iceberg.Float32Type, iceberg.Float64Type:
			return out
		}
		if idx < 0 {
			return out
		}
		out = append(out, parquet.SortingColumn{ColumnIdx: int32(idx), NullsFirst: true})
	}
	return out
}

// arrowFieldID returns the Parquet field ID that an Arrow field carries in
// its metadata.
func arrowFieldID(f arrow.Field) (int, bool) {
	v, ok := f.Metadata.GetValue("PARQUET:field_id")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(v)
	return id, err == nil
}

// Write appends a batch of entries. It refuses, with ErrOutOfOrder, a batch
// whose clustering keys decrease within it or start below the last key
// written; equal keys are fine. A refused batch leaves the writer as it was.
func (w *RangeFileWriter) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	p, err := w.Prepare(rec)
	if err != nil {
		return err
	}
	return w.WritePrepared(p)
}

// PreparedBatch is a batch of entries checked and counted in the statistics
// (Prepare), whose stored columns WritePrepared encodes.
type PreparedBatch struct {
	stored arrow.RecordBatch // nil for an empty batch
}

// Release drops a prepared batch that will not be written.
func (p *PreparedBatch) Release() {
	if p.stored != nil {
		p.stored.Release()
		p.stored = nil
	}
}

// Prepare is the first half of Write: it checks rec's columns and the order
// of its keys and takes its statistics in; WritePrepared encodes it. The two
// halves of consecutive batches may run at the same time on two goroutines
// (the next batch prepared while the one before is encoded), each half in
// batch order; every prepared batch must be written, or released, before
// the next is written. A refused batch leaves the writer as it was.
func (w *RangeFileWriter) Prepare(rec arrow.RecordBatch) (*PreparedBatch, error) {
	if w.closed {
		return nil, errors.New("write range file: writer is closed")
	}
	cols, err := w.matchColumns(rec)
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	if n == 0 {
		return &PreparedBatch{}, nil
	}
	views := make([]columnView, len(cols))
	for i, col := range cols {
		if views[i], err = newColumnView(w.acc[i].typ, col); err != nil {
			return nil, fmt.Errorf("write range file: %w", err)
		}
	}
	cluster := make([]columnView, len(w.clusterPos))
	for i, pos := range w.clusterPos {
		cluster[i] = views[pos]
	}
	if err := w.checkOrder(cluster, n); err != nil {
		return nil, err
	}
	for i := range views {
		w.acc[i].add(views[i])
	}
	storedCols := make([]arrow.Array, len(w.storedPos))
	for i, pos := range w.storedPos {
		storedCols[i] = cols[pos]
	}
	w.lastKey = keyAt(cluster, n-1)
	w.prepared += int64(n)
	return &PreparedBatch{stored: array.NewRecordBatch(w.stored, storedCols, int64(n))}, nil
}

// WritePrepared encodes a batch Prepare returned, and releases it.
func (w *RangeFileWriter) WritePrepared(p *PreparedBatch) error {
	defer p.Release()
	if w.err != nil {
		return w.err
	}
	if p.stored == nil {
		return nil
	}
	n := p.stored.NumRows()
	if err := w.fw.WriteBuffered(p.stored); err != nil {
		w.err = fmt.Errorf("write range file: %w", err)
		return w.err
	}
	w.rows += n
	if w.copies != nil {
		w.copies.written += n
	}
	return nil
}

// matchColumns returns the batch's columns in the order of the entry schema,
// matched by field ID.
func (w *RangeFileWriter) matchColumns(rec arrow.RecordBatch) ([]arrow.Array, error) {
	cols := make([]arrow.Array, w.entries.NumFields())
	for i, f := range rec.Schema().Fields() {
		id, ok := arrowFieldID(f)
		if !ok {
			return nil, fmt.Errorf("write range file: column %q has no field ID", f.Name)
		}
		pos, ok := w.posByID[id]
		if !ok {
			return nil, fmt.Errorf("write range file: column %q has field ID %d, which is not an index field", f.Name, id)
		}
		if cols[pos] != nil {
			return nil, fmt.Errorf("write range file: two columns have field ID %d", id)
		}
		if want := w.entries.Field(pos).Type; !arrow.TypeEqual(f.Type, want) {
			return nil, fmt.Errorf("write range file: column %q (field %d) is %s, want %s", f.Name, id, f.Type, want)
		}
		cols[pos] = rec.Column(i)
	}
	for i, c := range cols {
		if c == nil {
			f := w.entries.Field(i)
			id, _ := arrowFieldID(f)
			return nil, fmt.Errorf("write range file: no column for field %d (%s)", id, f.Name)
		}
	}
	return cols, nil
}

func (w *RangeFileWriter) checkOrder(cluster []columnView, n int) error {
	types := w.schema.ClusterTypes()
	if w.lastKey != nil {
		if first := keyAt(cluster, 0); CompareKeys(types, first, w.lastKey) < 0 {
			return w.outOfOrder(w.lastKey, first)
		}
	}
	if len(cluster) == 1 && cluster[0].descent != nil && cluster[0].arr.NullN() == 0 {
		if i := cluster[0].descent(); i > 0 {
			return w.outOfOrder(keyAt(cluster, i-1), keyAt(cluster, i))
		}
		return nil
	}
	for i := 1; i < n; i++ {
		if compareKeyRows(cluster, i-1, i) > 0 {
			return w.outOfOrder(keyAt(cluster, i-1), keyAt(cluster, i))
		}
	}
	return nil
}

func (w *RangeFileWriter) outOfOrder(prev, next Key) error {
	types := w.schema.ClusterTypes()
	return fmt.Errorf("write range file: key (%s) after (%s): %w",
		formatKey(types, next), formatKey(types, prev), ErrOutOfOrder)
}

func formatKey(types []iceberg.Type, k Key) string {
	parts := make([]string, len(k))
	for i, v := range k {
		parts[i] = FormatValue(types[i], v)
	}
	return strings.Join(parts, ", ")
}

// EstimatedSize is the size the file would have if it were closed now: the
// bytes already written plus those of the row group being buffered. The
// buffered row group counts its compressed pages, or, once a row group has
// been written, its rows at the bytes per row of those written when that is
// more: dictionary pages and the page being filled are written only when
// the row group closes. Writers use it to close range files near a target
// size.
func (w *RangeFileWriter) EstimatedSize() int64 {
	if w.closed {
		if w.copies != nil {
			return w.copies.size
		}
		return w.sink.n
	}
	buffered := w.fw.RowGroupTotalCompressedBytes()
	written, copied := w.rows, int64(0)
	if w.copies != nil {
		written, copied = w.copies.written, w.copies.bytes
	}
	// Row groups written before a copied one may be small, their bytes
	// per row (a page header and a dictionary a column) no guide.
	if rgRows, err := w.fw.RowGroupNumRows(); err == nil && copied == 0 {
		if done := written - int64(rgRows); done > 0 {
			buffered = max(buffered, int64(float64(w.sink.n)/float64(done)*float64(rgRows)))
		}
	}
	return w.sink.n + buffered + copied
}

// LastKey returns the clustering key of the last entry written, or nil before
// the first. Writers that split output into several range files cut only
// where the next key differs from it, since all entries of one key must share
// a file.
func (w *RangeFileWriter) LastKey() Key { return w.lastKey }

// Close writes the Parquet footer and returns the tracking file entry of the
// file, less its FilePath, which only the caller knows. It must be called
// even after a failed Write, to release the writer's buffers; it then
// returns that failure.
func (w *RangeFileWriter) Close() (TrackingEntry, error) {
	if w.closed {
		return TrackingEntry{}, errors.New("close range file: writer is closed")
	}
	w.closed = true
	closeErr := w.fw.Close()
	if w.err != nil {
		return TrackingEntry{}, w.err
	}
	if closeErr != nil {
		return TrackingEntry{}, fmt.Errorf("close range file: %w", closeErr)
	}
	size := w.sink.n
	if w.copies != nil {
		var err error
		if size, err = w.copies.finish(); err != nil {
			return TrackingEntry{}, fmt.Errorf("close range file: %w", err)
		}
	}
	e := TrackingEntry{
		FileFormat:      "parquet",
		RecordCount:     w.rows,
		FileSizeInBytes: size,
		Stats:           make(map[int]*FieldStats, len(w.acc)),
	}
	for i, f := range w.entries.Fields() {
		id, _ := arrowFieldID(f)
		e.Stats[id] = w.acc[i].stats()
	}
	if w.lastKey != nil {
		for i, f := range w.schema.ClusterFields() {
			e.Stats[f.ID].GroupMax = w.lastKey[i]
			e.Stats[f.ID].HasGroupMax = true
		}
	}
	return e, nil
}

// countingWriter counts the bytes of the file, which are its size.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
