package format

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A Block is a run of rows of one row group with every stored column
// decoded once, for a reader that comes back to the same rows again and
// again (the lookup service keeps blocks in a cache): picking rows out of
// a block costs no read and no decompression. Strings and binary values
// stay dictionary-encoded as the file has them, which keeps a block of
// _file paths small, and become plain values only for the rows picked.
// A Block is read-only and safe for concurrent use; it needs no Release,
// its buffers are the Go allocator's.
type Block struct {
	layout
	rec arrow.RecordBatch
	col map[int]int // field ID to column of rec
	// dicts holds, per column of rec, the dictionary of a dictionary-
	// encoded column (nil for the others).
	dicts []arrow.Array
	// ascendingInt64s holds, by field ID, the values of the columns of
	// longs that SeekInts can search as they are (see
	// ascendingInt64Columns).
	ascendingInt64s map[int][]int64
	// bytes is the size of the block's buffers.
	bytes int64
	// ordered caches, per field, whether its values ascend down the block.
	orderMu sync.Mutex
	ordered map[int]bool
	// proj is the last projection Rows was asked for: a service asks one
	// block for the same fields thousands of times.
	proj atomic.Pointer[blockProjection]
}

// blockProjection is what Rows derives from the fields asked for: the
// columns, where the block has them, and the Arrow schemas of the batch as
// the block holds it (in) and as Rows returns it (out).
type blockProjection struct {
	fieldIDs []int // as asked (nil: all)
	cols     []storedColumn
	at       []int // column of rec for each of cols
	in, out  *arrow.Schema
}

// projected returns the projection of fieldIDs, derived once per block for
// the fields last asked for.
func (b *Block) projected(fieldIDs []int) (*blockProjection, error) {
	if p := b.proj.Load(); p != nil && (p.fieldIDs == nil) == (fieldIDs == nil) && slices.Equal(p.fieldIDs, fieldIDs) {
		return p, nil
	}
	cols, err := b.projection(fieldIDs)
	if err != nil {
		return nil, err
	}
	p := &blockProjection{fieldIDs: slices.Clone(fieldIDs), cols: cols, at: make([]int, len(cols))}
	in := make([]arrow.Field, len(cols))
	out := make([]arrow.Field, len(cols))
	for i, c := range cols {
		j, ok := b.col[c.field.ID]
		if !ok {
			return nil, &CorruptFileError{Path: b.name, Err: fmt.Errorf("reader returned no column for field %d", c.field.ID)}
		}
		p.at[i], in[i], out[i] = j, b.rec.Schema().Field(j), c.want
	}
	p.in, p.out = arrow.NewSchema(in, nil), arrow.NewSchema(out, nil)
	b.proj.Store(p)
	return p, nil
}

// ReadBlock reads rows [first, first+n) of row group rowGroup, every stored
// field, seeking with the offset index to the page that holds first.
func (r *RangeFileReader) ReadBlock(ctx context.Context, rowGroup int, first, n int64) (*Block, error) {
	if rowGroup < 0 || rowGroup >= r.NumRowGroups() {
		return nil, fmt.Errorf("read range file %s: no row group %d of %d", r.name, rowGroup, r.NumRowGroups())
	}
	total := r.pf.MetaData().RowGroup(rowGroup).NumRows()
	if first < 0 || n <= 0 || first+n > total {
		return nil, fmt.Errorf("read range file %s: rows [%d, %d) are not in row group %d of %d rows", r.name, first, first+n, rowGroup, total)
	}
	mem := memory.DefaultAllocator
	rdr, err := r.seekReader(ctx, r.stored, rowGroup, first, n, mem)
	if err != nil {
		return nil, err
	}
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
		rdr.Release()
	}()
	for got := int64(0); got < n; {
		next, err := r.nextBatch(ctx, rdr)
		if err != nil {
			return nil, err
		}
		if !next {
			return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("row group %d ended %d rows early", rowGroup, n-got)}
		}
		rec := rdr.RecordBatch()
		k := min(rec.NumRows(), n-got)
		parts = append(parts, rec.NewSlice(0, k))
		got += k
	}
	// Copied out of the reader's buffers, which are sized for its batches
	// (a block kept them alive, twice the bytes of its rows and more), into
	// buffers of just its rows.
	rec, err := copyBatches(mem, parts)
	if err != nil {
		return nil, r.failure("read", err)
	}
	b := &Block{layout: r.layout, rec: rec, col: map[int]int{}, dicts: make([]arrow.Array, rec.NumCols())}
	for i, f := range rec.Schema().Fields() {
		id, _ := arrowFieldID(f)
		b.col[id] = i
		b.bytes += int64(rec.Column(i).Data().SizeInBytes())
		if d, ok := rec.Column(i).(*array.Dictionary); ok {
			// Made here, once: Dictionary() builds the array on first
			// use, which concurrent readers must not race on.
			b.dicts[i] = d.Dictionary()
		}
	}
	b.ascendingInt64s = b.ascendingInt64Columns()
	return b, nil
}

// copyBatches joins batches of one schema into one of new buffers, even
// when there is only one.
func copyBatches(mem memory.Allocator, parts []arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, parts[0].NumCols())
	var rows int64
	for _, p := range parts {
		rows += p.NumRows()
	}
	for j := range cols {
		// An empty array joined last makes Concatenate copy a lone part too.
		empty := array.NewSlice(parts[0].Column(j), 0, 0)
		defer empty.Release()
		arrs := make([]arrow.Array, 0, len(parts)+1)
		for _, p := range parts {
			arrs = append(arrs, p.Column(j))
		}
		a, err := array.Concatenate(append(arrs, empty), mem)
		if err != nil {
			return nil, err
		}
		cols[j] = a
		defer a.Release()
	}
	return array.NewRecordBatch(parts[0].Schema(), cols, rows), nil
}

// NumRows is the block's number of rows.
func (b *Block) NumRows() int64 { return b.rec.NumRows() }

// Bytes is the memory the block holds: the bytes of its buffers, which
// hold just its rows.
func (b *Block) Bytes() int64 { return b.bytes }

// Rows returns the given rows of the block (offsets in the block,
// ascending; nil for all) with the given stored fields (nil: all, in
// StoredSchema order), typed as ArrowSchema(StoredSchema) has them, as Read
// does. What the batch does not share with the block (rows picked out of
// order, values converted) is allocated with compute.GetAllocator(ctx);
// the caller releases it.
func (b *Block) Rows(ctx context.Context, fieldIDs []int, rows []int64) (arrow.RecordBatch, error) {
	p, err := b.projected(fieldIDs)
	if err != nil {
		return nil, err
	}
	for i, r := range rows {
		if r < 0 || r >= b.NumRows() || (i > 0 && r <= rows[i-1]) {
			return nil, fmt.Errorf("read range file %s: rows of a block of %d must ascend; row %d is %d", b.name, b.NumRows(), i, r)
		}
	}
	if n := len(rows); rows == nil || n == 0 || rows[n-1]-rows[0] == int64(n-1) {
		// One run of rows, as a point lookup finds (nil: all of them).
		first, count := int64(0), int64(n)
		if rows == nil {
			count = b.NumRows()
		} else if n > 0 {
			first = rows[0]
		}
		return b.run(ctx, p, first, count)
	}
	picked := make([]arrow.Array, len(p.cols))
	for i, j := range p.at {
		picked[i] = b.rec.Column(j)
	}
	rec := array.NewRecordBatch(p.in, picked, b.rec.NumRows())
	defer rec.Release()
	ib := array.NewInt64Builder(compute.GetAllocator(ctx))
	ib.AppendValues(rows, nil)
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	recDatum, idxDatum := compute.NewDatum(rec), compute.NewDatum(idx)
	defer recDatum.Release()
	defer idxDatum.Release()
	taken, err := compute.Take(ctx, *compute.DefaultTakeOptions(), recDatum, idxDatum)
	if err != nil {
		return nil, fmt.Errorf("read range file %s: pick rows: %w", b.name, err)
	}
	defer taken.Release()
	rec = taken.(*compute.RecordDatum).Value
	// The columns are in the order of p.cols already.
	return b.convertColumns(ctx, rec.Columns(), rec.NumRows(), p.out, p.cols)
}

// run returns rows [first, first+n) of the projection p: slices of the
// block's buffers where the type is the one readers get, and strings and
// binary values unpacked from the dictionary for just those rows.
func (b *Block) run(ctx context.Context, p *blockProjection, first, n int64) (arrow.RecordBatch, error) {
	mem := compute.GetAllocator(ctx)
	arrs := make([]arrow.Array, len(p.cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range p.cols {
		j := p.at[i]
		col, want := b.rec.Column(j), c.want.Type
		if d, ok := col.(*array.Dictionary); ok && b.dicts[j] != nil && arrow.TypeEqual(b.dicts[j].DataType(), want) {
			if arrs[i] = unpackRun(mem, d, b.dicts[j], int(first), int(n)); arrs[i] != nil {
				continue
			}
		}
		part := array.NewSlice(col, first, first+n)
		a, err := convertArray(ctx, part, want)
		part.Release()
		if err != nil {
			return nil, &CorruptFileError{Path: b.name, Err: fmt.Errorf("column for field %d: %w", c.field.ID, err)}
		}
		arrs[i] = a
	}
	return array.NewRecordBatch(p.out, arrs, n), nil
}
