package format

import (
	"context"
	"fmt"
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
	name string // the range file's, for errors
	rec  arrow.RecordBatch
	cols []storedColumn
	byID map[int]int // field ID to position in cols and rec
	// bytesOf counts what the block's buffers hold.
	bytesOf *countingAllocator
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
	// The bytes the block holds are what its allocations leave behind once
	// the reader is released: buffers reserved and not used count too.
	mem := &countingAllocator{Allocator: memory.DefaultAllocator}
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
	rec, err := concatBatches(mem, parts)
	if err != nil {
		return nil, r.failure("read", err)
	}
	b := &Block{name: r.name, rec: rec, cols: r.stored, byID: map[int]int{}}
	for i, f := range rec.Schema().Fields() {
		id, _ := arrowFieldID(f)
		b.byID[id] = i
	}
	for _, c := range r.stored {
		if _, ok := b.byID[c.field.ID]; !ok {
			return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("reader returned no column for field %d", c.field.ID)}
		}
	}
	// Measured once the reader and the parts are released (deferred): a
	// Block holds what the allocator still counts then.
	b.bytesOf = mem
	return b, nil
}

// countingAllocator counts the bytes allocated and not yet freed.
type countingAllocator struct {
	memory.Allocator
	live atomic.Int64
}

func (c *countingAllocator) Allocate(n int) []byte {
	c.live.Add(int64(n))
	return c.Allocator.Allocate(n)
}

func (c *countingAllocator) Reallocate(n int, b []byte) []byte {
	c.live.Add(int64(n - len(b)))
	return c.Allocator.Reallocate(n, b)
}

func (c *countingAllocator) Free(b []byte) {
	c.live.Add(-int64(len(b)))
	c.Allocator.Free(b)
}

// concatBatches joins batches of one schema into one.
func concatBatches(mem memory.Allocator, parts []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	cols := make([]arrow.Array, parts[0].NumCols())
	var rows int64
	for _, p := range parts {
		rows += p.NumRows()
	}
	for j := range cols {
		arrs := make([]arrow.Array, len(parts))
		for i, p := range parts {
			arrs[i] = p.Column(j)
		}
		a, err := array.Concatenate(arrs, mem)
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

// Bytes is the memory the block holds: its buffers as allocated, unused
// capacity included.
func (b *Block) Bytes() int64 { return b.bytesOf.live.Load() }

// Rows returns the given rows of the block (offsets in the block,
// ascending; nil for all) with the given stored fields (nil: all, in
// StoredSchema order), typed as ArrowSchema(StoredSchema) has them, as Read
// does. The batch is allocated with compute.GetAllocator(ctx); the caller
// releases it.
func (b *Block) Rows(ctx context.Context, fieldIDs []int, rows []int64) (arrow.RecordBatch, error) {
	cols := b.cols
	if fieldIDs != nil {
		cols = make([]storedColumn, len(fieldIDs))
		for i, id := range fieldIDs {
			j := -1
			for k := range b.cols {
				if b.cols[k].field.ID == id {
					j = k
				}
			}
			if j < 0 {
				return nil, fmt.Errorf("read range file %s: field %d is not stored in range files", b.name, id)
			}
			cols[i] = b.cols[j]
		}
	}
	var idx arrow.Array
	if rows != nil {
		for i, r := range rows {
			if r < 0 || r >= b.NumRows() || (i > 0 && r <= rows[i-1]) {
				return nil, fmt.Errorf("read range file %s: rows of a block of %d must ascend; row %d is %d", b.name, b.NumRows(), i, r)
			}
		}
		ib := array.NewInt64Builder(compute.GetAllocator(ctx))
		ib.AppendValues(rows, nil)
		idx = ib.NewArray()
		ib.Release()
		defer idx.Release()
	}
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range cols {
		fields[i] = c.want
		col := b.rec.Column(b.byID[c.field.ID])
		if idx != nil {
			picked, err := compute.TakeArray(ctx, col, idx)
			if err != nil {
				return nil, fmt.Errorf("read range file %s: pick rows: %w", b.name, err)
			}
			defer picked.Release()
			col = picked
		}
		a, err := convertArray(ctx, col, c.want.Type)
		if err != nil {
			return nil, &CorruptFileError{Path: b.name, Err: fmt.Errorf("column for field %d: %w", c.field.ID, err)}
		}
		arrs[i] = a
	}
	n := b.NumRows()
	if rows != nil {
		n = int64(len(rows))
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, n), nil
}
