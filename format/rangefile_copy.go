package format

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
)

// Row groups copied as they are. A merge that rewrites a range file of
// several row groups needs to decode only those the delta's keys fall into:
// the others go to the new file byte for byte, their column chunks, column
// indexes and offset indexes copied and their offsets moved, with no page
// decompressed. arrow-go's writers take values, not encoded pages, so the
// new file is assembled here: the rows written through the Parquet writer
// go to a buffer, a complete file of their own, and at the close the row
// groups of that file and the copied ones are laid out in order behind one
// footer, the Parquet writer's with the row groups replaced.
//
// Parquet structures used, by Thrift field ID (parquet.thrift):
// FileMetaData 2 schema, 3 num_rows, 4 row_groups; RowGroup 1 columns,
// 3 num_rows, 5 file_offset, 7 ordinal; ColumnChunk 2 file_offset,
// 3 meta_data, 4/5 offset index offset and length, 6/7 column index offset
// and length, 8/9 encryption; ColumnMetaData 7 total_compressed_size,
// 9 data_page_offset, 10 index_page_offset, 11 dictionary_page_offset,
// 14/15 bloom filter; OffsetIndex 1 page_locations; PageLocation 1 offset.

const (
	fmSchema, fmNumRows, fmRowGroups                  = 2, 3, 4
	rgColumns, rgNumRows, rgFileOffset, rgOrdinal     = 1, 3, 5, 7
	ccFileOffset, ccMeta, ccOffIdx, ccOffIdxLen       = 2, 3, 4, 5
	ccColIdx, ccColIdxLen, ccCrypto, ccEncryptedMeta  = 6, 7, 8, 9
	cmCompressed, cmDataPage, cmIndexPage, cmDictPage = 7, 9, 10, 11
	cmBloomOffset, olPageLocations, plOffset          = 14, 1, 1
)

var parquetMagic = []byte("PAR1")

// ErrCannotCopyRowGroup is returned (wrapped, with the reason) by
// RangeFileWriter.CopyRowGroup for a row group it cannot copy as it is:
// its file has another Parquet schema (written before a type promotion, or
// by another writer), statistics are missing, or the index has fields that
// only decoding can give statistics for. Nothing was written; the caller
// writes the rows through Write instead.
var ErrCannotCopyRowGroup = errors.New("row group cannot be copied as it is")

// CanCopyRowGroups reports whether the range files of s can have row groups
// copied as they are: every index field is stored (the statistics of a
// computed one, a bucket say, are known only from its values) and none is
// a float or double (Parquet statistics do not count NaNs, and widen
// signed zeros).
func CanCopyRowGroups(s *IndexSchema) bool {
	for _, f := range s.Fields() {
		if !f.Stored() {
			return false
		}
		switch f.Type.(type) {
		case iceberg.Float32Type, iceberg.Float64Type:
			return false
		}
	}
	return true
}

// footerOf reads and decodes the Parquet footer of a file of size bytes.
func footerOf(r io.ReaderAt, size int64) (tStruct, error) {
	if size < 12 {
		return nil, fmt.Errorf("%d bytes are too few for a Parquet file", size)
	}
	tail := make([]byte, 8)
	if _, err := r.ReadAt(tail, size-8); err != nil {
		return nil, err
	}
	if !bytes.Equal(tail[4:], parquetMagic) {
		return nil, errors.New("no Parquet magic at the end")
	}
	n := int64(binary.LittleEndian.Uint32(tail))
	if n > size-12 {
		return nil, fmt.Errorf("footer of %d bytes in a %d-byte file", n, size)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-8-n); err != nil {
		return nil, err
	}
	fm, _, err := readStruct(buf)
	return fm, err
}

// rawRowGroup is a row group lifted out of a file: its footer entry (offsets
// still those of the file it came from) and the bytes it refers to.
type rawRowGroup struct {
	meta     tStruct
	rows     int64
	chunks   []rawChunk
	byteSize int64 // of the chunks
}

type rawChunk struct {
	start    int64 // offset of the chunk's first page in its file
	data     []byte
	colIndex []byte  // the column index as stored, or nil
	offIndex tStruct // the offset index decoded, or nil
	cc       tStruct // the ColumnChunk of meta
	md       tStruct // its ColumnMetaData
}

// liftRowGroup reads row group g of the file whose footer is fm.
func liftRowGroup(r io.ReaderAt, size int64, fm tStruct, g int) (*rawRowGroup, error) {
	rgs, _ := fieldList(fm, fmRowGroups)
	if g < 0 || g >= len(rgs) {
		return nil, fmt.Errorf("no row group %d of %d", g, len(rgs))
	}
	meta, ok := rgs[g].(tStruct)
	if !ok {
		return nil, errors.New("row group is not a struct")
	}
	meta = meta.clone()
	raw := &rawRowGroup{meta: meta}
	raw.rows, _ = meta.i64(rgNumRows)
	cols, ok := fieldList(meta, rgColumns)
	if !ok {
		return nil, errors.New("row group without columns")
	}
	// Where each chunk and its page indexes are, read below in as few
	// reads as they allow: on an object store each read is a request.
	var regions []region
	for i, c := range cols {
		cc, ok := c.(tStruct)
		if !ok {
			return nil, fmt.Errorf("column chunk %d is not a struct", i)
		}
		if cc.field(1) != nil || cc.field(ccCrypto) != nil || cc.field(ccEncryptedMeta) != nil {
			return nil, fmt.Errorf("column chunk %d is in another file or encrypted", i)
		}
		md, ok := cc.field(ccMeta).valueStruct()
		if !ok {
			return nil, fmt.Errorf("column chunk %d has no metadata", i)
		}
		if md.field(cmBloomOffset) != nil {
			return nil, fmt.Errorf("column chunk %d has a bloom filter", i)
		}
		start, ok := md.i64(cmDataPage)
		if !ok {
			return nil, fmt.Errorf("column chunk %d has no data page offset", i)
		}
		if d, ok := md.i64(cmDictPage); ok && d > 0 && d < start {
			start = d
		}
		raw.chunks = append(raw.chunks, rawChunk{start: start, cc: cc, md: md})
		n, _ := md.i64(cmCompressed)
		regions = append(regions, region{what: fmt.Sprintf("column chunk %d", i), off: start, n: n, col: i, kind: regionChunk})
		if off, ok := cc.i64(ccColIdx); ok {
			n, _ := cc.i64(ccColIdxLen)
			regions = append(regions, region{what: fmt.Sprintf("column index %d", i), off: off, n: n, col: i, kind: regionColumnIndex})
		}
		if off, ok := cc.i64(ccOffIdx); ok {
			n, _ := cc.i64(ccOffIdxLen)
			regions = append(regions, region{what: fmt.Sprintf("offset index %d", i), off: off, n: n, col: i, kind: regionOffsetIndex})
		}
	}
	if err := readRegions(r, size, regions); err != nil {
		return nil, err
	}
	for _, rg := range regions {
		ch := &raw.chunks[rg.col]
		switch rg.kind {
		case regionChunk:
			ch.data = rg.data
			raw.byteSize += int64(len(rg.data))
		case regionColumnIndex:
			ch.colIndex = rg.data
		case regionOffsetIndex:
			var err error
			if ch.offIndex, _, err = readStruct(rg.data); err != nil {
				return nil, fmt.Errorf("%s: %w", rg.what, err)
			}
		}
	}
	return raw, nil
}

// region is a byte range of a file that liftRowGroup needs.
type region struct {
	what   string // for errors
	off, n int64
	col    int
	kind   int
	data   []byte // once read
}

const (
	regionChunk = iota
	regionColumnIndex
	regionOffsetIndex
)

// maxRegionGap is the most bytes between two regions that readRegions reads
// over to read both at once.
const maxRegionGap = 64 << 10

// readRegions reads every region of a file of size bytes, those at most
// maxRegionGap apart in one read (a row group's chunks lie back to back,
// and so do its page indexes).
func readRegions(r io.ReaderAt, size int64, regions []region) error {
	order := make([]int, len(regions))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(regions[a].off, regions[b].off) })
	for i := 0; i < len(order); {
		first := &regions[order[i]]
		from, to := first.off, first.off+first.n
		j := i
		for ; j < len(order); j++ {
			rg := &regions[order[j]]
			if rg.off < 4 || rg.n < 0 || rg.off > size-8 || rg.n > size-8-rg.off {
				return fmt.Errorf("%s: %d bytes at offset %d are outside the file's %d", rg.what, rg.n, rg.off, size)
			}
			if j > i && rg.off > to+maxRegionGap {
				break
			}
			to = max(to, rg.off+rg.n)
		}
		buf := make([]byte, to-from)
		if _, err := r.ReadAt(buf, from); err != nil {
			return fmt.Errorf("%s: %w", first.what, err)
		}
		for _, k := range order[i:j] {
			rg := &regions[k]
			rg.data = buf[rg.off-from : rg.off-from+rg.n : rg.off-from+rg.n]
		}
		i = j
	}
	return nil
}

// valueStruct returns the struct a field holds.
func (f *tField) valueStruct() (tStruct, bool) {
	if f == nil {
		return nil, false
	}
	s, ok := f.v.(tStruct)
	return s, ok
}

// fieldList returns the items of a list field.
func fieldList(s tStruct, id int16) ([]any, bool) {
	f := s.field(id)
	if f == nil {
		return nil, false
	}
	l, ok := f.v.(*tList)
	if !ok {
		return nil, false
	}
	return l.items, true
}

// assemble writes to out a Parquet file of the row groups of written (a
// complete Parquet file, whose footer it takes for the schema and key-value
// metadata) with the copied row groups placed among them: copied[i] goes
// before the first row group of written that starts at or after row
// after[i] of written. Row groups of written without rows are dropped. It
// returns the size of the file.
func assemble(out io.Writer, written []byte, copied []*rawRowGroup, after []int64) (int64, error) {
	fm, err := footerOf(bytes.NewReader(written), int64(len(written)))
	if err != nil {
		return 0, fmt.Errorf("read the Parquet writer's footer: %w", err)
	}
	own, _ := fieldList(fm, fmRowGroups)
	var order []*rawRowGroup
	var rows, done int64
	next := 0
	for g := range own {
		raw, err := liftRowGroup(bytes.NewReader(written), int64(len(written)), fm, g)
		if err != nil {
			return 0, fmt.Errorf("read the Parquet writer's row group %d: %w", g, err)
		}
		for next < len(copied) && after[next] <= done {
			order = append(order, copied[next])
			next++
		}
		if raw.rows > 0 {
			order = append(order, raw)
		}
		done += raw.rows
	}
	order = append(order, copied[next:]...)

	w := &countingWriter{w: out}
	if _, err := w.Write(parquetMagic); err != nil {
		return 0, err
	}
	groups := make([]any, len(order))
	type index struct {
		cc  tStruct
		col []byte
		off tStruct
	}
	var indexes []index
	for g, raw := range order {
		meta := raw.meta.clone()
		chunks := make([]any, len(raw.chunks))
		for i, ch := range raw.chunks {
			d := w.n - ch.start
			cc, md := ch.cc.clone(), ch.md.clone()
			md.shift(cmDataPage, d)
			md.shift(cmIndexPage, d)
			md.shift(cmDictPage, d)
			cc.field(ccMeta).v = md
			cc.shift(ccFileOffset, d)
			var off tStruct
			if ch.offIndex != nil {
				off = ch.offIndex.clone()
				locs, _ := fieldList(off, olPageLocations)
				for _, l := range locs {
					if pl, ok := l.(tStruct); ok {
						pl.shift(plOffset, d)
					}
				}
			}
			if i == 0 {
				meta.setInt(rgFileOffset, tcI64, w.n)
			}
			if _, err := w.Write(ch.data); err != nil {
				return 0, err
			}
			chunks[i] = cc
			indexes = append(indexes, index{cc: cc, col: ch.colIndex, off: off})
		}
		meta.field(rgColumns).v = &tList{elem: tcStruct, items: chunks}
		meta.setInt(rgOrdinal, tcI16, int64(g))
		groups[g] = meta
		rows += raw.rows
	}
	// Column indexes, then offset indexes, as the Parquet writer lays them
	// out.
	for _, ix := range indexes {
		if ix.col == nil {
			continue
		}
		ix.cc.setInt(ccColIdx, tcI64, w.n)
		ix.cc.setInt(ccColIdxLen, tcI32, int64(len(ix.col)))
		if _, err := w.Write(ix.col); err != nil {
			return 0, err
		}
	}
	for _, ix := range indexes {
		if ix.off == nil {
			continue
		}
		b := appendStruct(nil, ix.off)
		ix.cc.setInt(ccOffIdx, tcI64, w.n)
		ix.cc.setInt(ccOffIdxLen, tcI32, int64(len(b)))
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	fm.setInt(fmNumRows, tcI64, rows)
	fm.field(fmRowGroups).v = &tList{elem: tcStruct, items: groups}
	footer := appendStruct(nil, fm)
	footer = binary.LittleEndian.AppendUint32(footer, uint32(len(footer)))
	if _, err := w.Write(append(footer, parquetMagic...)); err != nil {
		return 0, err
	}
	return w.n, nil
}

// copySource is what a reader keeps to lend its row groups: its footer,
// decoded once, and its Parquet schema encoded, to compare with a writer's.
type copySource struct {
	footer tStruct
	schema []byte
}

func (r *RangeFileReader) copySource(ctx context.Context) (*copySource, error) {
	if r.copy != nil {
		return r.copy, nil
	}
	// The footer the Parquet reader holds, encoded again: no read of the
	// file.
	b, err := r.pf.MetaData().Serialize(ctx)
	if err != nil {
		return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("encode footer: %w", err)}
	}
	fm, _, err := readStruct(b)
	if err != nil {
		return nil, &CorruptFileError{Path: r.name, Err: err}
	}
	f := fm.field(fmSchema)
	if f == nil {
		return nil, &CorruptFileError{Path: r.name, Err: errors.New("footer without a schema")}
	}
	r.copy = &copySource{footer: fm, schema: appendValue(nil, f.typ, f.v)}
	return r.copy, nil
}

// rowGroupEnds returns the clustering keys of the first and last entries
// of row group g, of rows entries and the given statistics. A key of one
// field without nulls in the row group, which is sorted by it, is its
// minimum and maximum; other keys are read.
func (r *RangeFileReader) rowGroupEnds(ctx context.Context, s *IndexSchema, g int, rows int64, stats map[int]*FieldStats) (first, last Key, err error) {
	if cf := s.ClusterFields(); len(cf) == 1 {
		st := stats[cf[0].ID]
		if st != nil && st.NullValueCount != nil && *st.NullValueCount == 0 && st.LowerBound != nil && st.UpperBound != nil {
			return Key{st.LowerBound}, Key{st.UpperBound}, nil
		}
	}
	if first, err = r.ClusterKey(ctx, s, g, 0); err != nil {
		return nil, nil, err
	}
	last, err = r.ClusterKey(ctx, s, g, rows-1)
	return first, last, err
}

// ClusterKey returns the clustering key of row row of row group g, reading
// only the pages of the cluster fields that hold it; every cluster field of
// s must be stored.
func (r *RangeFileReader) ClusterKey(ctx context.Context, s *IndexSchema, g int, row int64) (Key, error) {
	var ids []int
	for _, f := range s.ClusterFields() {
		ids = append(ids, f.ID)
	}
	var key Key
	err := r.ReadRows(ctx, ids, g, []int64{row}, func(rec arrow.RecordBatch) error {
		for i, f := range s.ClusterFields() {
			key = append(key, ValueAtAs(f.Type, rec.Column(i), 0))
		}
		return nil
	})
	if err == nil && len(key) != len(ids) {
		err = &CorruptFileError{Path: r.name, Err: fmt.Errorf("row %d of row group %d not read", row, g)}
	}
	return key, err
}

// rowGroupCopies is what a RangeFileWriter that copies row groups keeps:
// the file the Parquet writer writes, in memory, and the row groups to
// place among its own.
type rowGroupCopies struct {
	out     io.Writer
	buf     bytes.Buffer
	props   *parquet.WriterProperties
	aprops  pqarrow.ArrowWriterProperties
	written int64 // rows written through the Parquet writer
	copied  []*rawRowGroup
	after   []int64 // of copied: the rows written through the Parquet writer before it
	bytes   int64   // of the copied column chunks
	size    int64   // of the file, once finished
}

// ownSchema returns the encoded Parquet schema of the files this writer
// writes for index s: that of an empty file written with the same
// properties, made once per index schema.
func (c *rowGroupCopies) ownSchema(s *IndexSchema, stored *arrow.Schema) ([]byte, error) {
	if s.parquetSchema == nil {
		return c.encodeSchema(stored)
	}
	s.parquetSchema.once.Do(func() { s.parquetSchema.b, s.parquetSchema.err = c.encodeSchema(stored) })
	return s.parquetSchema.b, s.parquetSchema.err
}

// encodeSchema writes an empty file with the writer's properties and
// returns its Parquet schema, encoded. The properties that differ between
// writers (row group and page sizes, the codec) do not show in it.
func (c *rowGroupCopies) encodeSchema(stored *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(stored, &buf, c.props, c.aprops)
	if err != nil {
		return nil, err
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	fm, err := footerOf(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	f := fm.field(fmSchema)
	if f == nil {
		return nil, errors.New("the Parquet writer wrote no schema")
	}
	return appendValue(nil, f.typ, f.v), nil
}

// finish writes the file to its destination and returns its size.
func (c *rowGroupCopies) finish() (int64, error) {
	var err error
	if len(c.copied) == 0 {
		c.size, err = io.Copy(c.out, &c.buf)
	} else {
		c.size, err = assemble(c.out, c.buf.Bytes(), c.copied, c.after)
	}
	c.buf, c.copied = bytes.Buffer{}, nil
	return c.size, err
}

// CopyRowGroup appends row group g of r, as it is, after the entries
// written so far: its pages are not decoded. The writer must have been made
// with RangeFileOptions.CopyRowGroups. The tracking entry's statistics take
// the row group's Parquet statistics in. It fails with
// ErrCannotCopyRowGroup (nothing written) when the row group cannot be
// copied: see CanCopyRowGroups, and a file whose Parquet schema differs
// from what this writer writes, or that lacks a statistic. A row group
// whose first clustering key is below the last one written is refused
// with ErrOutOfOrder.
func (w *RangeFileWriter) CopyRowGroup(ctx context.Context, r *RangeFileReader, g int) error {
	switch {
	case w.closed:
		return errors.New("copy row group: writer is closed")
	case w.err != nil:
		return w.err
	case w.copies == nil:
		return fmt.Errorf("copy row group: the writer was not made to copy row groups: %w", ErrCannotCopyRowGroup)
	case !CanCopyRowGroups(w.schema):
		return fmt.Errorf("copy row group: the index has computed or floating-point fields: %w", ErrCannotCopyRowGroup)
	case g < 0 || g >= r.NumRowGroups():
		return fmt.Errorf("copy row group: no row group %d of %d in %s", g, r.NumRowGroups(), r.name)
	}
	src, err := r.copySource(ctx)
	if err != nil {
		return err
	}
	own, err := w.copies.ownSchema(w.schema, w.stored)
	if err != nil {
		return fmt.Errorf("copy row group: %w", err)
	}
	if !bytes.Equal(src.schema, own) {
		return fmt.Errorf("copy row group of %s: its Parquet schema is not the one written now: %w", r.name, ErrCannotCopyRowGroup)
	}
	rows, stats := r.RowGroupStats(g)
	for _, f := range w.entries.Fields() {
		id, _ := arrowFieldID(f)
		st := stats[id]
		if st == nil || st.ValueCount == nil || st.NullValueCount == nil ||
			*st.NullValueCount < *st.ValueCount && (st.LowerBound == nil || st.UpperBound == nil) {
			return fmt.Errorf("copy row group %d of %s: field %d lacks statistics: %w", g, r.name, id, ErrCannotCopyRowGroup)
		}
	}
	first, last, err := r.rowGroupEnds(ctx, w.schema, g, rows, stats)
	if err != nil {
		return err
	}
	if w.lastKey != nil && CompareKeys(w.schema.ClusterTypes(), first, w.lastKey) < 0 {
		return w.outOfOrder(w.lastKey, first)
	}
	raw, err := liftRowGroup(r.src, r.src.size, src.footer, g)
	if err != nil {
		return r.failure("copy row group of", err)
	}
	if raw.rows != rows {
		return &CorruptFileError{Path: r.name, Err: fmt.Errorf("row group %d has %d rows in one place and %d in another", g, rows, raw.rows)}
	}
	// The rows written before go into a row group of their own.
	if n, err := w.fw.RowGroupNumRows(); err == nil && n > 0 {
		if err := w.fw.NewBufferedRowGroupChecked(); err != nil {
			w.err = fmt.Errorf("write range file: %w", err)
			return w.err
		}
	}
	for i, f := range w.entries.Fields() {
		id, _ := arrowFieldID(f)
		st, acc := stats[id], &w.acc[i]
		acc.values += *st.ValueCount
		acc.nulls += *st.NullValueCount
		if st.LowerBound != nil && (acc.lower == nil || Compare(acc.typ, st.LowerBound, acc.lower) < 0) {
			acc.lower = st.LowerBound
		}
		if st.UpperBound != nil && (acc.upper == nil || Compare(acc.typ, st.UpperBound, acc.upper) > 0) {
			acc.upper = st.UpperBound
		}
	}
	w.copies.copied = append(w.copies.copied, raw)
	w.copies.after = append(w.copies.after, w.copies.written)
	w.copies.bytes += raw.byteSize
	w.rows += rows
	w.lastKey = last
	return nil
}

// RowGroupBytes returns the compressed size of row group g's column chunks
// (g must be in [0, NumRowGroups())): what copying it adds to a file,
// besides its page indexes.
func (r *RangeFileReader) RowGroupBytes(g int) int64 {
	rg := r.pf.MetaData().RowGroup(g)
	if n := rg.TotalCompressedSize(); n > 0 {
		return n
	}
	var n int64 // written by a writer that leaves the field out
	for i := range rg.NumColumns() {
		if cc, err := rg.ColumnChunk(i); err == nil {
			n += cc.TotalCompressedSize()
		}
	}
	return n
}

// CopiedBytes is the size of the column chunks of the row groups copied so
// far (CopyRowGroup).
func (w *RangeFileWriter) CopiedBytes() int64 {
	if w.copies == nil {
		return 0
	}
	return w.copies.bytes
}
