package format

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// RangeFileReadOptions tune reading range files. The zero value selects the
// defaults.
type RangeFileReadOptions struct {
	// BatchRows caps the rows of each batch that Read hands on. Default 64*1024.
	BatchRows int
	// Allocator allocates the batches' buffers. Default memory.DefaultAllocator.
	Allocator memory.Allocator
	// Footer is the file's parsed footer, kept from an earlier open of the
	// same file (Footer), so that it is not read and decoded again.
	// Default: nil, read from the file.
	Footer *metadata.FileMetaData
	// Streamed reads column chunks in pieces of 16 KiB as the decoder
	// asks, rather than each chunk whole: a lookup that seeks with the
	// offset index to one page then reads about that page, not the chunk
	// of its row group, at the price of more, smaller reads for one that
	// reads chunks whole. Default false.
	Streamed bool
	// DictionaryFields are stored string or binary fields (by field ID)
	// that Read hands on as Arrow dictionaries of their type, the way
	// Parquet stores a column of few distinct values (_file): a reader that
	// looks at each value once is spared a copy of every repeat of a long
	// string. Default: none.
	DictionaryFields []int
}

// RangeFileReader reads a range file written by any engine: columns are
// found by field ID, never by name, and every Arrow layout of an Iceberg type
// is accepted (large strings, uuid as plain fixed(16)), so files written by
// other Iceberg writers read as well as streamidx's own. It is not safe for
// concurrent use.
type RangeFileReader struct {
	layout
	src *storageReader
	pf  *file.Reader
	fr  *pqarrow.FileReader
	// copy is the footer as CopyRowGroup reads it, once asked for.
	copy *copySource
}

// layout is where the stored fields of a range file are, which a reader
// and the blocks it reads share; it does not change once the file is open.
type layout struct {
	name   string         // the file's, for errors
	stored []storedColumn // in StoredSchema order
	byID   map[int]int    // field ID to position in stored
}

// storedColumn is where a stored index field lives in the file.
type storedColumn struct {
	field    IndexField
	want     arrow.Field // as ArrowSchema(StoredSchema) has it
	leaf     int         // Parquet leaf column index
	fileType arrow.DataType
}

// OpenRangeFile opens a range file for reading; name is used in errors.
// Anything malformed, including a stored field that is missing or has
// another type, is a *CorruptFileError; a failure of r itself is returned
// as such.
func OpenRangeFile(r parquet.ReaderAtSeeker, name string, s *IndexSchema, opts RangeFileReadOptions) (*RangeFileReader, error) {
	if opts.BatchRows < 0 {
		return nil, fmt.Errorf("open range file %s: negative BatchRows %d", name, opts.BatchRows)
	}
	if opts.BatchRows == 0 {
		opts.BatchRows = 64 * 1024
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	stored, err := ArrowSchema(s.StoredSchema())
	if err != nil {
		return nil, err
	}
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("open range file %s: %w", name, err)
	}
	rr := &RangeFileReader{layout: layout{name: name, byID: map[int]int{}}, src: &storageReader{r: r, size: size}}
	err = rr.guard(func() error {
		var err error
		props := parquet.NewReaderProperties(opts.Allocator)
		if opts.Streamed {
			props.BufferedStreamEnabled = true
			props.BufferSize = 16 << 10
		}
		ropts := []file.ReadOption{file.WithReadProps(props)}
		if opts.Footer != nil {
			ropts = append(ropts, file.WithMetadata(opts.Footer))
		}
		rr.pf, err = file.NewParquetReader(rr.src, ropts...)
		if err != nil {
			return err
		}
		aprops := pqarrow.ArrowReadProperties{BatchSize: int64(opts.BatchRows)}
		for _, leaf := range dictionaryLeaves(rr.pf.MetaData().Schema, opts.DictionaryFields) {
			aprops.SetReadDict(leaf, true)
		}
		rr.fr, err = pqarrow.NewFileReader(rr.pf, aprops, opts.Allocator)
		return err
	})
	if err != nil {
		if rr.pf != nil {
			rr.pf.Close()
		}
		return nil, rr.failure("open", err)
	}
	if err := rr.matchColumns(s, stored); err != nil {
		rr.pf.Close()
		return nil, &CorruptFileError{Path: name, Err: err}
	}
	return rr, nil
}

// dictionaryLeaves gives the leaf columns of the top-level byte-array
// columns whose field IDs are in ids: those the Parquet reader can hand on
// as dictionaries.
func dictionaryLeaves(sc *schema.Schema, ids []int) []int {
	var leaves []int
	for i := range sc.NumColumns() {
		col := sc.Column(i)
		node := col.SchemaNode()
		if col.PhysicalType() == parquet.Types.ByteArray && node.Parent() == sc.Root() && slices.Contains(ids, int(node.FieldID())) {
			leaves = append(leaves, i)
		}
	}
	return leaves
}

// Footer is the file's parsed footer, which may be kept and given to later
// opens of the same file (RangeFileReadOptions.Footer). It is read-only.
func (r *RangeFileReader) Footer() *metadata.FileMetaData { return r.pf.MetaData() }

// matchColumns finds the file's column for every stored field by field ID
// and checks its type.
func (r *RangeFileReader) matchColumns(s *IndexSchema, stored *arrow.Schema) error {
	root := r.pf.MetaData().Schema.Root()
	manifest := r.fr.Manifest
	if len(manifest.Fields) != root.NumFields() {
		return fmt.Errorf("schema has %d top-level fields, Arrow manifest %d", root.NumFields(), len(manifest.Fields))
	}
	top := map[int]int{}
	for j := range root.NumFields() {
		id := int(root.Field(j).FieldID())
		if _, isIndexField := s.Field(id); !isIndexField {
			continue // a column the index does not define: ignored, as Iceberg readers do
		}
		if _, dup := top[id]; dup {
			return fmt.Errorf("two columns have field ID %d", id)
		}
		top[id] = j
	}
	for _, want := range stored.Fields() {
		id, _ := arrowFieldID(want)
		f, _ := s.Field(id)
		j, ok := top[id]
		if !ok {
			return fmt.Errorf("no column has field ID %d (%s %s)", id, f.Name, f.Type)
		}
		sf := manifest.Fields[j]
		got, plain := sf.Field.Type, want.Type
		if dict, ok := got.(*arrow.DictionaryType); ok && arrow.TypeEqual(dict.ValueType, plain) {
			// Asked for as a dictionary (DictionaryFields): handed on as one.
			got = dict.ValueType
			want.Type = &arrow.DictionaryType{IndexType: dict.IndexType, ValueType: plain}
		}
		if !sf.IsLeaf() || !readableAs(got, plain) {
			return fmt.Errorf("column %q (field ID %d) is %s, want %s", root.Field(j).Name(), id, sf.Field.Type, f.Type)
		}
		r.byID[id] = len(r.stored)
		r.stored = append(r.stored, storedColumn{field: f, want: want, leaf: sf.ColIndex, fileType: got})
	}
	return nil
}

// readableAs reports whether a column that Parquet decodes to Arrow type got
// holds values of the Iceberg type whose Arrow type is want. Besides other
// layouts of the same type, that is the table spec's type promotions: an
// identity field takes the type of the table snapshot an index snapshot
// references, so a range file written before its column was promoted (int
// to long, float to double, a decimal widened at the same scale) is read
// with the promotion applied.
func readableAs(got, want arrow.DataType) bool {
	if arrow.TypeEqual(got, want) {
		return true
	}
	switch want.ID() {
	case arrow.INT64:
		return got.ID() == arrow.INT32
	case arrow.FLOAT64:
		return got.ID() == arrow.FLOAT32
	case arrow.DECIMAL128:
		g, ok1 := got.(arrow.DecimalType)
		w, ok2 := want.(arrow.DecimalType)
		return ok1 && ok2 && g.GetScale() == w.GetScale() && g.GetPrecision() <= w.GetPrecision()
	case arrow.STRING:
		return got.ID() == arrow.LARGE_STRING || got.ID() == arrow.STRING_VIEW
	case arrow.BINARY:
		return got.ID() == arrow.LARGE_BINARY || got.ID() == arrow.BINARY_VIEW
	case arrow.EXTENSION:
		ext, ok := want.(arrow.ExtensionType)
		return ok && arrow.TypeEqual(got, ext.StorageType())
	}
	return false
}

// NumRows returns the number of entries in the file.
func (r *RangeFileReader) NumRows() int64 { return r.pf.NumRows() }

// NumRowGroups returns the number of row groups, the unit of skipping.
func (r *RangeFileReader) NumRowGroups() int { return r.pf.NumRowGroups() }

// RowGroupStats returns the rows of row group i (which must be in [0,
// NumRowGroups())) and the statistics of its stored fields, by field ID,
// taken from the Parquet column chunk statistics and converted to canonical
// values so that callers can skip row groups a lookup cannot match. Metrics
// the file does not record are nil; the bounds may be looser than the values
// (Parquet widens 0.0 to -0.0 and back), never tighter.
func (r *RangeFileReader) RowGroupStats(i int) (rows int64, stats map[int]*FieldStats) {
	rg := r.pf.MetaData().RowGroup(i)
	stats = make(map[int]*FieldStats, len(r.stored))
	for _, c := range r.stored {
		cc, err := rg.ColumnChunk(c.leaf)
		if err != nil {
			continue
		}
		stats[c.field.ID] = chunkStats(c.field.Type, cc)
	}
	return rg.NumRows(), stats
}

func chunkStats(t iceberg.Type, cc *metadata.ColumnChunkMetaData) *FieldStats {
	values := cc.NumValues()
	st := &FieldStats{ValueCount: &values}
	if set, err := cc.StatsSet(); err != nil || !set {
		return st
	}
	ts, err := cc.Statistics()
	if err != nil || ts == nil {
		return st
	}
	if ts.HasNullCount() {
		nulls := ts.NullCount()
		st.NullValueCount = &nulls
	}
	if !ts.HasMinMax() {
		return st
	}
	lo, hi := statsValue(t, ts, false), statsValue(t, ts, true)
	if lo != nil && hi != nil && CheckValue(t, lo) == nil && CheckValue(t, hi) == nil {
		st.LowerBound, st.UpperBound = lo, hi
	}
	return st
}

// statsValue converts the min (or max) of Parquet statistics to the
// canonical value of t, or nil when it has no usable value.
func statsValue(t iceberg.Type, ts metadata.TypedStatistics, isMax bool) any {
	pick := func(lo, hi any) any {
		if isMax {
			return hi
		}
		return lo
	}
	_, isDecimal := t.(iceberg.DecimalType)
	switch s := ts.(type) {
	case *metadata.BooleanStatistics:
		return pick(s.Min(), s.Max())
	case *metadata.Int32Statistics:
		v := pick(s.Min(), s.Max()).(int32)
		if isDecimal {
			return decimal128.FromI64(int64(v))
		}
		return promoted(t, v)
	case *metadata.Int64Statistics:
		v := pick(s.Min(), s.Max()).(int64)
		if isDecimal {
			return decimal128.FromI64(v)
		}
		return v
	case *metadata.Float32Statistics:
		if v := pick(s.Min(), s.Max()).(float32); !math.IsNaN(float64(v)) {
			return promoted(t, v)
		}
	case *metadata.Float64Statistics:
		if v := pick(s.Min(), s.Max()).(float64); !math.IsNaN(v) {
			return v
		}
	case *metadata.ByteArrayStatistics:
		return bytesStatsValue(t, pick([]byte(s.Min()), []byte(s.Max())).([]byte))
	case *metadata.FixedLenByteArrayStatistics:
		return bytesStatsValue(t, pick([]byte(s.Min()), []byte(s.Max())).([]byte))
	}
	return nil
}

func bytesStatsValue(t iceberg.Type, b []byte) any {
	switch t.(type) {
	case iceberg.StringType:
		return string(b)
	case iceberg.UUIDType:
		if len(b) == 16 {
			return uuid.UUID(b)
		}
	case iceberg.DecimalType:
		if n, ok := decimalFromBigEndian(b); ok {
			return n
		}
	case iceberg.FixedType, iceberg.BinaryType:
		return clone(b)
	}
	return nil
}

// decimalFromBigEndian decodes Parquet's big-endian two's complement
// unscaled decimal of up to 16 bytes.
func decimalFromBigEndian(b []byte) (decimal128.Num, bool) {
	if len(b) == 0 || len(b) > 16 {
		return decimal128.Num{}, false
	}
	var buf [16]byte
	if b[0]&0x80 != 0 {
		for i := range buf {
			buf[i] = 0xff
		}
	}
	copy(buf[16-len(b):], b)
	return decimal128.New(int64(binary.BigEndian.Uint64(buf[:8])), binary.BigEndian.Uint64(buf[8:])), true
}

// Read calls fn with the entries of the given row groups (nil: all) in file
// order, in batches whose columns are the given stored fields (nil: all, in
// StoredSchema order), named and typed as ArrowSchema(StoredSchema) has them
// (DictionaryFields as dictionaries of that type), field ID metadata
// included. A batch is released when fn returns; fn
// retains it to keep it. An error from fn stops the read and is returned.
func (r *RangeFileReader) Read(ctx context.Context, fieldIDs []int, rowGroups []int, fn func(arrow.RecordBatch) error) error {
	cols, err := r.projection(fieldIDs)
	if err != nil {
		return err
	}
	for _, g := range rowGroups {
		if g < 0 || g >= r.NumRowGroups() {
			return fmt.Errorf("read range file %s: no row group %d of %d", r.name, g, r.NumRowGroups())
		}
	}
	if rowGroups != nil && len(rowGroups) == 0 {
		return nil
	}
	fields := make([]arrow.Field, len(cols))
	leaves := make([]int, len(cols))
	for i, c := range cols {
		fields[i] = c.want
		leaves[i] = c.leaf
	}
	out := arrow.NewSchema(fields, nil)

	var rdr pqarrow.RecordReader
	if err := r.guard(func() error {
		var err error
		rdr, err = r.fr.GetRecordReader(ctx, leaves, rowGroups)
		return err
	}); err != nil {
		return r.failure("read", err)
	}
	defer rdr.Release()
	for {
		next, err := r.nextBatch(ctx, rdr)
		if err != nil {
			return err
		}
		if !next {
			return nil
		}
		batch, err := r.convert(ctx, rdr.RecordBatch(), out, cols)
		if err != nil {
			return err
		}
		err = fn(batch)
		batch.Release()
		if err != nil {
			return err
		}
	}
}

func (r *layout) projection(fieldIDs []int) ([]storedColumn, error) {
	if fieldIDs == nil {
		return r.stored, nil
	}
	cols := make([]storedColumn, len(fieldIDs))
	seen := map[int]bool{}
	for i, id := range fieldIDs {
		pos, ok := r.byID[id]
		if !ok {
			return nil, fmt.Errorf("read range file %s: field %d is not stored in range files", r.name, id)
		}
		if seen[id] {
			return nil, fmt.Errorf("read range file %s: field %d requested twice", r.name, id)
		}
		seen[id] = true
		cols[i] = r.stored[pos]
	}
	return cols, nil
}

// convert rearranges a batch from the Parquet reader, whose columns come in
// file order with the file's names and Arrow layouts, into the projected
// columns of the stored schema.
func (r *layout) convert(ctx context.Context, rec arrow.RecordBatch, out *arrow.Schema, cols []storedColumn) (arrow.RecordBatch, error) {
	byID := make(map[int]arrow.Array, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		id, _ := arrowFieldID(f)
		byID[id] = rec.Column(i)
	}
	got := make([]arrow.Array, len(cols))
	for i, c := range cols {
		a, ok := byID[c.field.ID]
		if !ok {
			return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("reader returned no column for field %d", c.field.ID)}
		}
		got[i] = a
	}
	return r.convertColumns(ctx, got, rec.NumRows(), out, cols)
}

// convertColumns makes a batch of schema out from got, the arrays of cols
// in that order as the Parquet reader returned them, each converted to its
// column's Arrow type.
func (r *layout) convertColumns(ctx context.Context, got []arrow.Array, rows int64, out *arrow.Schema, cols []storedColumn) (arrow.RecordBatch, error) {
	arrs := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range cols {
		a, err := convertArray(ctx, got[i], c.want.Type)
		if err != nil {
			return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("column for field %d: %w", c.field.ID, err)}
		}
		arrs[i] = a
	}
	return array.NewRecordBatch(out, arrs, rows), nil
}

// convertArray returns arr in Arrow type want (retained: the caller
// releases it).
func convertArray(ctx context.Context, arr arrow.Array, want arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), want) {
		arr.Retain()
		return arr, nil
	}
	if ext, ok := want.(arrow.ExtensionType); ok {
		return array.NewExtensionArrayWithStorage(ext, arr), nil
	}
	if d, ok := arr.(*array.Dictionary); ok && arrow.TypeEqual(d.Dictionary().DataType(), want) {
		if out := unpackBinary(compute.GetAllocator(ctx), d); out != nil {
			return out, nil
		}
	}
	return compute.CastArray(ctx, arr, compute.SafeCastOptions(want))
}

// unpackBinary turns a dictionary of strings or binary values into the
// values, row by row; nil for other value types. A lookup unpacks the _file
// of a row or a few: through a compute kernel, finding the kernel and
// setting up its execution cost more than the copy.
func unpackBinary(mem memory.Allocator, d *array.Dictionary) arrow.Array {
	return unpackRun(mem, d, d.Dictionary(), 0, d.Len())
}

// unpackRun returns rows [from, from+n) of d, whose dictionary of strings
// or binary values is dict, as plain values in buffers of just their size,
// allocated with mem; nil for other value types. dict is passed in so that
// a reader that keeps d (a Block) gets it once, not as a new array per call.
func unpackRun(mem memory.Allocator, d *array.Dictionary, dict arrow.Array, from, n int) arrow.Array {
	var valueLen func(j int) int
	var put func(dst []byte, j int) int
	switch v := dict.(type) {
	case *array.String:
		valueLen, put = v.ValueLen, func(dst []byte, j int) int { return copy(dst, v.Value(j)) }
	case *array.Binary:
		valueLen, put = v.ValueLen, func(dst []byte, j int) int { return copy(dst, v.Value(j)) }
	default:
		return nil
	}
	size, nulls := 0, 0
	for i := from; i < from+n; i++ {
		if d.IsNull(i) || dict.IsNull(d.GetValueIndex(i)) {
			nulls++
		} else {
			size += valueLen(d.GetValueIndex(i))
		}
	}
	if int64(size) > math.MaxInt32 {
		return nil // beyond 32-bit offsets: left to the cast kernel, which says so
	}
	offsets := memory.NewResizableBuffer(mem)
	offsets.Resize(arrow.Int32Traits.BytesRequired(n + 1))
	offs := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	data := memory.NewResizableBuffer(mem)
	data.Resize(size)
	var valid *memory.Buffer
	var bits []byte
	if nulls > 0 {
		valid = memory.NewResizableBuffer(mem)
		valid.Resize(int(bitutil.BytesForBits(int64(n))))
		bits = valid.Bytes()
		clear(bits)
	}
	at := 0
	for k := range n {
		offs[k] = int32(at)
		i := from + k
		if d.IsNull(i) || dict.IsNull(d.GetValueIndex(i)) {
			continue
		}
		at += put(data.Bytes()[at:], d.GetValueIndex(i))
		if bits != nil {
			bitutil.SetBit(bits, k)
		}
	}
	offs[n] = int32(at)
	ad := array.NewData(dict.DataType(), n, []*memory.Buffer{valid, offsets, data}, nil, nulls, 0)
	defer ad.Release()
	for _, b := range []*memory.Buffer{valid, offsets, data} {
		if b != nil {
			b.Release()
		}
	}
	return array.MakeFromData(ad)
}

// Close releases the file. It does not close the reader given to
// OpenRangeFile.
func (r *RangeFileReader) Close() error {
	if err := r.pf.Close(); err != nil {
		return fmt.Errorf("close range file %s: %w", r.name, err)
	}
	return nil
}

// guard runs a step of the Parquet decoder, turning a panic on malformed
// input into an error: a bad file must not stop the process.
func (r *RangeFileReader) guard(step func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode: %v", p)
		}
	}()
	return step()
}

// failure classifies an error of the Parquet decoder: a failure of the
// underlying reader is returned as it is (it may be retried), anything else
// means the bytes are malformed.
func (r *RangeFileReader) failure(op string, err error) error {
	if ioErr := r.src.failure(); ioErr != nil {
		return fmt.Errorf("%s range file %s: %w", op, r.name, ioErr)
	}
	return &CorruptFileError{Path: r.name, Err: err}
}

// storageReader remembers the first failure of the reader under a range
// file, which tells storage trouble from malformed bytes. Reads outside the
// file, which only a corrupt footer asks for, never reach the storage: they
// fail as io.EOF does on a truncated file.
type storageReader struct {
	r    parquet.ReaderAtSeeker
	size int64
	mu   sync.Mutex
	err  error
}

func (s *storageReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > s.size {
		return 0, fmt.Errorf("read at offset %d of a %d-byte file: %w", off, s.size, io.EOF)
	}
	short := false
	if int64(len(p)) > s.size-off {
		p, short = p[:s.size-off], true
	}
	n, err := s.r.ReadAt(p, off)
	s.note(err)
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

func (s *storageReader) Seek(offset int64, whence int) (int64, error) {
	n, err := s.r.Seek(offset, whence)
	s.note(err)
	return n, err
}

func (s *storageReader) note(err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *storageReader) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// nextBatch advances a record reader, telling a cancelled context, a
// failure of the storage and a corrupt file apart.
func (r *RangeFileReader) nextBatch(ctx context.Context, rdr pqarrow.RecordReader) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var next bool
	if err := r.guard(func() error {
		next = rdr.Next()
		return rdr.Err()
	}); err != nil {
		return false, r.readFailure(ctx, err)
	}
	return next, nil
}

// readFailure classifies an error of a decoding step: a cancelled context
// (the decoder stopped because of it) before storage trouble and corrupt
// bytes.
func (r *RangeFileReader) readFailure(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return r.failure("read", err)
}
