package format

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ReadRows is Read for chosen rows of one row group: rows are offsets in
// the row group, ascending and without repeats. A lookup that has found
// its matches by the key columns pays for the other columns of those rows
// only, not of the row group: it seeks with the offset index to the first
// row, decodes string and binary columns as dictionary indices, and turns
// only the chosen rows into values. Batches hold at most
// RangeFileReadOptions.BatchRows rows and are allocated with
// compute.GetAllocator(ctx).
func (r *RangeFileReader) ReadRows(ctx context.Context, fieldIDs []int, rowGroup int, rows []int64, fn func(arrow.RecordBatch) error) error {
	cols, err := r.projection(fieldIDs)
	if err != nil {
		return err
	}
	if rowGroup < 0 || rowGroup >= r.NumRowGroups() {
		return fmt.Errorf("read range file %s: no row group %d of %d", r.name, rowGroup, r.NumRowGroups())
	}
	n := r.pf.MetaData().RowGroup(rowGroup).NumRows()
	for i, row := range rows {
		if row < 0 || row >= n || (i > 0 && row <= rows[i-1]) {
			return fmt.Errorf("read range file %s: rows must ascend within row group %d of %d rows; row %d is %d", r.name, rowGroup, n, i, row)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	first, last := rows[0], rows[len(rows)-1]
	wanted := make([]bool, last-first+1)
	for _, row := range rows {
		wanted[row-first] = true
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.want
	}
	out := arrow.NewSchema(fields, nil)
	// The record reader takes its batch size when it is made: no more than
	// the rows from the first wanted to the last.
	rdr, err := r.seekReader(ctx, cols, rowGroup, first, min(int64(len(wanted)), r.fr.Props.BatchSize), compute.GetAllocator(ctx))
	if err != nil {
		return err
	}
	defer rdr.Release()
	for len(wanted) > 0 {
		next, err := r.nextBatch(ctx, rdr)
		if err != nil {
			return err
		}
		if !next {
			return &CorruptFileError{Path: r.name, Err: fmt.Errorf("row group %d ended %d rows early", rowGroup, len(wanted))}
		}
		rec := rdr.RecordBatch()
		k := min(int(rec.NumRows()), len(wanted))
		err = r.handOn(ctx, rec, wanted[:k], out, cols, fn)
		wanted = wanted[k:]
		if err != nil {
			return err
		}
	}
	return nil
}

// seekReader returns a record reader of cols in row group rowGroup, at
// row first, in batches of batch rows, that decodes string and binary
// columns as the dictionary indices the file stores.
func (r *RangeFileReader) seekReader(ctx context.Context, cols []storedColumn, rowGroup int, first, batch int64, mem memory.Allocator) (pqarrow.RecordReader, error) {
	leaves := make([]int, len(cols))
	props := pqarrow.ArrowReadProperties{BatchSize: batch}
	for i, c := range cols {
		leaves[i] = c.leaf
		switch c.fileType.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
			props.SetReadDict(c.leaf, true)
		}
	}
	var rdr pqarrow.RecordReader
	if err := r.guard(func() error {
		fr, err := pqarrow.NewFileReader(r.pf, props, mem)
		if err != nil {
			return err
		}
		if rdr, err = fr.GetRecordReader(ctx, leaves, []int{rowGroup}); err != nil {
			return err
		}
		return rdr.SeekToRow(first)
	}); err != nil {
		if rdr != nil {
			rdr.Release()
		}
		return nil, r.failure("read", err)
	}
	return rdr, nil
}

// handOn gives fn the rows of rec that wanted marks, converted (see
// chosenRows), unless there are none.
func (r *RangeFileReader) handOn(ctx context.Context, rec arrow.RecordBatch, wanted []bool, out *arrow.Schema, cols []storedColumn, fn func(arrow.RecordBatch) error) error {
	batch, err := r.chosenRows(ctx, rec, wanted, out, cols)
	if err != nil || batch == nil {
		return err
	}
	defer batch.Release()
	return fn(batch)
}

// chosenRows converts the rows of rec that wanted marks (rec may have more
// rows than wanted; those are not chosen), or returns nil when none is.
func (r *RangeFileReader) chosenRows(ctx context.Context, rec arrow.RecordBatch, wanted []bool, out *arrow.Schema, cols []storedColumn) (arrow.RecordBatch, error) {
	count := 0
	for _, w := range wanted {
		if w {
			count++
		}
	}
	if count == 0 {
		return nil, nil
	}
	mem := compute.GetAllocator(ctx)
	mb := array.NewBooleanBuilder(mem)
	defer mb.Release()
	mb.AppendValues(wanted, nil)
	for range int(rec.NumRows()) - len(wanted) {
		mb.Append(false)
	}
	mask := mb.NewArray()
	defer mask.Release()
	picked, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("read range file %s: select rows: %w", r.name, err)
	}
	defer picked.Release()
	return r.convert(ctx, picked, out, cols)
}

// ReadMatching reads row group rowGroup whole, every stored field, in one
// pass: match sees each batch as decoded, every field typed as Read hands
// it on except string and binary fields, which stay the dictionaries of
// that type the file stores, and says which rows to keep; fn gets just
// those rows, as Read would give them. A lookup whose matches lie in every
// page (an IN of many keys) decodes each column once and turns only the
// strings of its matches into values. Batches are allocated with
// compute.GetAllocator(ctx).
func (r *RangeFileReader) ReadMatching(ctx context.Context, rowGroup int, match func(arrow.RecordBatch) ([]bool, error), fn func(arrow.RecordBatch) error) error {
	if rowGroup < 0 || rowGroup >= r.NumRowGroups() {
		return fmt.Errorf("read range file %s: no row group %d of %d", r.name, rowGroup, r.NumRowGroups())
	}
	cols := r.stored
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.want
	}
	out := arrow.NewSchema(fields, nil)
	rdr, err := r.seekReader(ctx, cols, rowGroup, 0, r.fr.Props.BatchSize, compute.GetAllocator(ctx))
	if err != nil {
		return err
	}
	defer rdr.Release()
	for {
		next, err := r.nextBatch(ctx, rdr)
		if err != nil || !next {
			return err
		}
		rec := rdr.RecordBatch()
		keep, err := r.matchDecoded(ctx, rec, match)
		if err != nil {
			return err
		}
		if err := r.handOn(ctx, rec, keep, out, cols, fn); err != nil {
			return err
		}
	}
}

// matchDecoded calls match with rec's columns in the types Read hands on,
// dictionaries aside.
func (r *RangeFileReader) matchDecoded(ctx context.Context, rec arrow.RecordBatch, match func(arrow.RecordBatch) ([]bool, error)) ([]bool, error) {
	arrs := make([]arrow.Array, rec.NumCols())
	fields := make([]arrow.Field, rec.NumCols())
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, f := range rec.Schema().Fields() {
		id, _ := arrowFieldID(f)
		pos, ok := r.byID[id]
		if !ok {
			return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("reader returned a column of no stored field (%d)", id)}
		}
		want := r.stored[pos].want
		if _, dict := rec.Column(i).DataType().(*arrow.DictionaryType); dict {
			want.Type = rec.Column(i).DataType()
		}
		a, err := convertArray(ctx, rec.Column(i), want.Type)
		if err != nil {
			return nil, &CorruptFileError{Path: r.name, Err: fmt.Errorf("column for field %d: %w", id, err)}
		}
		arrs[i], fields[i] = a, want
	}
	b := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
	defer b.Release()
	keep, err := match(b)
	if err != nil {
		return nil, err
	}
	if len(keep) != int(rec.NumRows()) {
		return nil, fmt.Errorf("read range file %s: match kept %d of %d rows", r.name, len(keep), rec.NumRows())
	}
	return keep, nil
}
