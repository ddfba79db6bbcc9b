package format

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ReadRows is Read for rows [first, first+count) of one row group. It seeks
// with the file's offset index, so only the pages that hold those rows are
// decoded: a lookup that has found its rows by the key columns reads the
// other columns of a few rows, not of the whole row group. Batches hold at
// most RangeFileReadOptions.BatchRows rows.
func (r *RangeFileReader) ReadRows(ctx context.Context, fieldIDs []int, rowGroup int, first, count int64, fn func(arrow.RecordBatch) error) error {
	cols, err := r.projection(fieldIDs)
	if err != nil {
		return err
	}
	if rowGroup < 0 || rowGroup >= r.NumRowGroups() {
		return fmt.Errorf("read range file %s: no row group %d of %d", r.name, rowGroup, r.NumRowGroups())
	}
	rows := r.pf.MetaData().RowGroup(rowGroup).NumRows()
	if first < 0 || count < 0 || first+count > rows {
		return fmt.Errorf("read range file %s: rows [%d, %d) are not in row group %d of %d rows", r.name, first, first+count, rowGroup, rows)
	}
	if count == 0 {
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
		// The record reader takes its batch size when it is made: no more
		// than the rows wanted, so a seek decodes no further than needed.
		batch := r.fr.Props.BatchSize
		r.fr.Props.BatchSize = min(count, batch)
		defer func() { r.fr.Props.BatchSize = batch }()
		var err error
		if rdr, err = r.fr.GetRecordReader(ctx, leaves, []int{rowGroup}); err != nil {
			return err
		}
		return rdr.SeekToRow(first)
	}); err != nil {
		if rdr != nil {
			rdr.Release()
		}
		return r.failure("read", err)
	}
	defer rdr.Release()
	for count > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		var next bool
		if err := r.guard(func() error {
			next = rdr.Next()
			return rdr.Err()
		}); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return r.failure("read", err)
		}
		if !next {
			return &CorruptFileError{Path: r.name, Err: fmt.Errorf("row group %d ended %d rows early", rowGroup, count)}
		}
		rec := rdr.RecordBatch()
		var batch arrow.RecordBatch
		var err error
		if rec.NumRows() > count {
			part := rec.NewSlice(0, count)
			batch, err = r.convert(ctx, part, out, cols)
			part.Release()
		} else {
			batch, err = r.convert(ctx, rec, out, cols)
		}
		if err != nil {
			return err
		}
		count -= batch.NumRows()
		err = fn(batch)
		batch.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
