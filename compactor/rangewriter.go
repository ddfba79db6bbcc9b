package compactor

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// RangeWriterOptions tune how entries become range files.
type RangeWriterOptions struct {
	// TargetFileSize closes a range file once it holds about this many
	// bytes, at the next change of clustering key. Default: 128 MiB.
	TargetFileSize int64
	// RowGroupRows caps the rows of a Parquet row group. Default: 131072.
	RowGroupRows int
	// PageSizeBytes is the Parquet data page size: smaller pages let
	// lookups skip more through the page index. Default: 64 KiB.
	PageSizeBytes int
	// BatchRows is the number of entries handed to the Parquet writer at
	// once. Default: 8192.
	BatchRows int
	// Store writes the files. Default: a store for local files only.
	Store *objstore.Store
	// Allocator for Arrow buffers. Default: memory.DefaultAllocator.
	Allocator memory.Allocator
}

func (o *RangeWriterOptions) ensureDefaults() {
	if o.TargetFileSize <= 0 {
		o.TargetFileSize = 128 << 20
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 128 * 1024
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 8192
	}
	o.BatchRows = min(o.BatchRows, o.RowGroupRows)
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Store == nil {
		o.Store = objstore.Local()
	}
}

// RangeWriter writes entries, given one by one in cluster order, into range
// files under dir. A file is closed when it reaches the target size and the
// clustering key changes, so all entries of one clustering key share a file.
// It belongs to one goroutine.
type RangeWriter struct {
	ctx        context.Context
	schema     *format.IndexSchema
	clusterPos []int // positions of the cluster fields in an entry
	dir        string
	opts       RangeWriterOptions

	arrowSchema *arrow.Schema
	builder     *array.RecordBuilder
	pending     int

	out     *objstore.Writer
	file    *format.RangeFileWriter
	full    bool       // the open file reached its target: close at the next key change
	lastKey format.Key // clustering key of the last entry added
	keyBuf  format.Key
	written []format.TrackingEntry
	bytes   int64
	closed  bool
}

// NewRangeWriter writes range files named <dir>/<uuid>.parquet.
func NewRangeWriter(ctx context.Context, s *format.IndexSchema, dir string, opts RangeWriterOptions) (*RangeWriter, error) {
	opts.ensureDefaults()
	as, err := format.ArrowSchema(s.EntrySchema())
	if err != nil {
		return nil, err
	}
	w := &RangeWriter{ctx: ctx, schema: s, dir: dir, opts: opts, arrowSchema: as}
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
// cluster order; the range file writer refuses anything else.
func (w *RangeWriter) Add(entry format.Key) error {
	w.keyBuf = w.keyBuf[:0]
	for _, p := range w.clusterPos {
		w.keyBuf = append(w.keyBuf, entry[p])
	}
	if w.full && w.lastKey != nil && format.CompareKeys(w.schema.ClusterTypes(), w.lastKey, w.keyBuf) != 0 {
		if err := w.finishFile(); err != nil {
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
	if w.pending >= w.opts.BatchRows {
		return w.flushBatch()
	}
	return nil
}

// flushBatch hands the buffered entries to the open range file, opening one
// when needed, and notes when the file reached its target size.
func (w *RangeWriter) flushBatch() error {
	if w.pending == 0 {
		return nil
	}
	if w.file == nil {
		if err := w.openFile(); err != nil {
			return err
		}
	}
	rec := w.builder.NewRecordBatch()
	defer rec.Release()
	w.pending = 0
	if err := w.file.Write(rec); err != nil {
		return fmt.Errorf("write range file %s: %w", w.out.Location(), err)
	}
	if w.file.EstimatedSize() >= w.opts.TargetFileSize {
		w.full = true
	}
	return nil
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
	f, err := format.NewRangeFileWriter(out, w.schema, format.RangeFileOptions{RowGroupRows: w.opts.RowGroupRows, PageSizeBytes: w.opts.PageSizeBytes, Allocator: w.opts.Allocator})
	if err != nil {
		out.Abort()
		return fmt.Errorf("start range file %s: %w", out.Location(), err)
	}
	w.out, w.file, w.full = out, f, false
	return nil
}

func (w *RangeWriter) finishFile() error {
	if err := w.flushBatch(); err != nil {
		return err
	}
	if w.file == nil {
		return nil
	}
	entry, err := w.file.Close()
	if err != nil {
		w.out.Abort()
		return fmt.Errorf("finish range file %s: %w", w.out.Location(), err)
	}
	if err := w.out.Close(); err != nil {
		return err
	}
	entry.FilePath = w.out.Location()
	w.bytes += entry.FileSizeInBytes
	w.written = append(w.written, entry)
	w.file, w.out, w.full = nil, nil, false
	return nil
}

// Close finishes the last file and returns the tracking entries of every
// file written, in cluster order.
func (w *RangeWriter) Close() ([]format.TrackingEntry, error) {
	defer w.release()
	if err := w.finishFile(); err != nil {
		return nil, err
	}
	return w.written, nil
}

// Abort drops the open file. Files already finished stay: the caller deletes
// them, or leaves them to orphan clean-up, since no snapshot references them.
func (w *RangeWriter) Abort() {
	if w.out != nil {
		w.out.Abort()
		w.out, w.file = nil, nil
	}
	w.release()
}

func (w *RangeWriter) release() {
	if !w.closed {
		w.closed = true
		w.builder.Release()
	}
}

// Written returns the tracking entries of the files finished so far.
func (w *RangeWriter) Written() []format.TrackingEntry { return w.written }

// BytesWritten is the size of the files finished so far.
func (w *RangeWriter) BytesWritten() int64 { return w.bytes }
