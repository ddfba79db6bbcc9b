package format

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// ReadMatchingInts is ReadMatching for a lookup whose filters all test
// integer-like stored fields (keyFields), without Arrow in between: the
// key columns are decoded by Parquet's column readers into buffers reused
// from batch to batch, match marks the rows to keep in each batch (vals[i]
// and valid[i] are keyFields[i]'s values and, for a column that may hold
// nulls, which rows are not null; keep starts all true), and the other
// columns are decoded into the same buffers and only the kept rows become
// Arrow values, handed to fn in batches typed as Read hands them on. An IN
// of many keys keeps a few rows of every page: the Arrow arrays of every
// row that ReadMatching builds and drops cost more than the decode.
//
// It reports false, reading nothing, when a stored column is not one it
// decodes (a decimal, a fixed-length or nested column, a string asked for
// as a dictionary, a value that needs converting other than int to long
// and float to double) or a key field is not integer-like; ReadMatching
// reads those. Batches are allocated with compute.GetAllocator(ctx).
func (r *RangeFileReader) ReadMatchingInts(ctx context.Context, rowGroup int, keyFields []int,
	match func(vals [][]int64, valid [][]bool, keep []bool) error, fn func(arrow.RecordBatch) error) (bool, error) {
	if rowGroup < 0 || rowGroup >= r.NumRowGroups() {
		return false, fmt.Errorf("read range file %s: no row group %d of %d", r.name, rowGroup, r.NumRowGroups())
	}
	mem := compute.GetAllocator(ctx)
	batch := int(r.fr.Props.BatchSize)
	cols := make([]*directColumn, len(r.stored))
	keyOf := make([]int, len(r.stored)) // position in keyFields, or -1
	for i, c := range r.stored {
		d, ok := r.directColumn(c, batch)
		if !ok {
			return false, nil
		}
		cols[i], keyOf[i] = d, -1
	}
	keys := make([]*directColumn, len(keyFields))
	for k, id := range keyFields {
		pos, ok := r.byID[id]
		if !ok || !cols[pos].intLike() {
			return false, nil
		}
		keys[k], keyOf[pos] = cols[pos], k
	}
	rg := r.pf.RowGroup(rowGroup)
	defer func() {
		for _, d := range cols {
			if d.rdr != nil {
				d.rdr.Close()
			}
		}
	}()
	if err := r.guard(func() error {
		for _, d := range cols {
			var err error
			if d.rdr, err = rg.Column(d.c.leaf); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return true, r.failure("read", err)
	}

	fields := make([]arrow.Field, len(r.stored))
	for i, c := range r.stored {
		fields[i] = c.want
	}
	out := arrow.NewSchema(fields, nil)
	builders := make([]array.Builder, len(cols))
	for i, c := range r.stored {
		builders[i] = array.NewBuilder(mem, c.want.Type)
	}
	defer func() {
		for _, b := range builders {
			b.Release()
		}
	}()
	kept := 0
	flush := func() error {
		arrs := make([]arrow.Array, len(builders))
		for i, b := range builders {
			arrs[i] = b.NewArray()
		}
		rec := array.NewRecordBatch(out, arrs, int64(kept))
		for _, a := range arrs {
			a.Release()
		}
		kept = 0
		defer rec.Release()
		return fn(rec)
	}

	vals, valid := make([][]int64, len(keys)), make([][]bool, len(keys))
	keep := make([]bool, batch)
	left := int(rg.NumRows())
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		n := min(batch, left)
		left -= n
		keep := keep[:n]
		for i := range keep {
			keep[i] = true
		}
		picked := 0
		err := r.guard(func() error {
			for k, d := range keys {
				if err := d.readInts(n); err != nil {
					return err
				}
				vals[k], valid[k] = d.ints[:n], d.validRows(n)
			}
			if err := match(vals, valid, keep); err != nil {
				return errMatch{err}
			}
			for _, k := range keep {
				if k {
					picked++
				}
			}
			for i, d := range cols {
				switch {
				case keyOf[i] >= 0:
					if picked > 0 {
						d.appendInts(keep, builders[i])
					}
				case picked > 0:
					if err := d.pick(n, keep, builders[i]); err != nil {
						return err
					}
				default:
					if err := d.skip(n); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if m, ok := err.(errMatch); ok {
			return true, m.err
		}
		if err != nil {
			return true, r.readFailure(ctx, err)
		}
		if kept += picked; kept >= batch || (left == 0 && kept > 0) {
			if err := flush(); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// errMatch carries an error of the caller's match out of a guarded step,
// so that it is not taken for a corrupt file.
type errMatch struct{ err error }

func (e errMatch) Error() string { return e.err.Error() }

// directColumn decodes one stored column of a row group for
// ReadMatchingInts into buffers it keeps.
type directColumn struct {
	c      storedColumn
	phys   parquet.Type
	maxDef int16
	rdr    file.ColumnChunkReader
	defs   []int16
	valid  []bool
	ints   []int64 // an integer column's values, one per row (0 where null)
	i32    []int32
	f32    []float32
	f64    []float64
	bools  []bool
	bytes  []parquet.ByteArray
}

// directColumn reports whether c is a column ReadMatchingInts decodes,
// and sets up its buffers for batches of batch rows.
func (r *RangeFileReader) directColumn(c storedColumn, batch int) (*directColumn, bool) {
	descr := r.pf.MetaData().Schema.Column(c.leaf)
	if descr.MaxRepetitionLevel() != 0 || descr.MaxDefinitionLevel() > 1 {
		return nil, false
	}
	d := &directColumn{c: c, phys: descr.PhysicalType(), maxDef: descr.MaxDefinitionLevel()}
	same := arrow.TypeEqual(c.fileType, c.want.Type)
	switch d.phys {
	case parquet.Types.Int64:
		switch c.want.Type.ID() {
		case arrow.INT64, arrow.TIMESTAMP, arrow.TIME64:
			if !same {
				return nil, false
			}
		default:
			return nil, false
		}
	case parquet.Types.Int32:
		switch {
		case same && (c.want.Type.ID() == arrow.INT32 || c.want.Type.ID() == arrow.DATE32):
		case c.want.Type.ID() == arrow.INT64 && c.fileType.ID() == arrow.INT32:
		default:
			return nil, false
		}
		d.i32 = make([]int32, batch)
	case parquet.Types.ByteArray:
		if !same || (c.want.Type.ID() != arrow.STRING && c.want.Type.ID() != arrow.BINARY) {
			return nil, false
		}
		d.bytes = make([]parquet.ByteArray, batch)
	case parquet.Types.Float:
		if c.fileType.ID() != arrow.FLOAT32 || (c.want.Type.ID() != arrow.FLOAT32 && c.want.Type.ID() != arrow.FLOAT64) {
			return nil, false
		}
		d.f32 = make([]float32, batch)
	case parquet.Types.Double:
		if !same || c.want.Type.ID() != arrow.FLOAT64 {
			return nil, false
		}
		d.f64 = make([]float64, batch)
	case parquet.Types.Boolean:
		if !same || c.want.Type.ID() != arrow.BOOL {
			return nil, false
		}
		d.bools = make([]bool, batch)
	default:
		return nil, false
	}
	if d.intLike() {
		d.ints = make([]int64, batch)
	}
	if d.maxDef > 0 {
		d.defs, d.valid = make([]int16, batch), make([]bool, batch)
	}
	return d, true
}

func (d *directColumn) intLike() bool {
	return d.phys == parquet.Types.Int64 || d.phys == parquet.Types.Int32
}

// validRows is which of the last n rows read are not null, or nil for a
// column that holds no nulls.
func (d *directColumn) validRows(n int) []bool {
	if d.maxDef == 0 {
		return nil
	}
	return d.valid[:n]
}

// readInts decodes the next n rows of an integer column into ints (and
// valid), one value per row.
func (d *directColumn) readInts(n int) error {
	return d.read(n, func(from, lvls, values int) {
		if d.phys == parquet.Types.Int32 {
			for v, x := range d.i32[:values] {
				d.ints[from+v] = int64(x)
			}
		}
		d.spread(d.ints[from:from+lvls], lvls, values)
	})
}

// spread moves the values read for rows from..from+lvls, packed at the
// front of dst, to their rows, marking nulls in valid.
func (d *directColumn) spread(dst []int64, lvls, values int) {
	if d.maxDef == 0 {
		return
	}
	v := values - 1
	for i := lvls - 1; i >= 0; i-- {
		if d.defs[i] == d.maxDef {
			dst[i] = dst[v]
			v--
		} else {
			dst[i] = 0
		}
	}
}

// read decodes the next n rows page by page: got is called after each
// page's part with the first row, the rows and the values (not nulls)
// decoded, the values at the front of the column's buffer (ints for a
// long, i32, f32, f64, bools or bytes) and the rows' definition levels in
// defs. A string or binary value points into its page and is valid until
// the next call.
func (d *directColumn) read(n int, got func(from, lvls, values int)) error {
	for from := 0; from < n; {
		var defs []int16
		if d.maxDef > 0 {
			defs = d.defs[:n-from]
		}
		want := int64(n - from)
		var lvls int64
		var values int
		var err error
		switch rdr := d.rdr.(type) {
		case *file.Int64ColumnChunkReader:
			lvls, values, err = rdr.ReadBatchInPage(want, d.ints[from:n], defs, nil)
		case *file.Int32ColumnChunkReader:
			lvls, values, err = rdr.ReadBatchInPage(want, d.i32[:want], defs, nil)
		case *file.ByteArrayColumnChunkReader:
			lvls, values, err = rdr.ReadBatchInPage(want, d.bytes[:want], defs, nil)
		case *file.Float32ColumnChunkReader:
			lvls, values, err = rdr.ReadBatchInPage(want, d.f32[:want], defs, nil)
		case *file.Float64ColumnChunkReader:
			lvls, values, err = rdr.ReadBatchInPage(want, d.f64[:want], defs, nil)
		case *file.BooleanColumnChunkReader:
			lvls, values, err = rdr.ReadBatchInPage(want, d.bools[:want], defs, nil)
		default:
			return fmt.Errorf("column %d: no direct reader for %T", d.c.leaf, d.rdr)
		}
		if err != nil {
			return err
		}
		if lvls == 0 {
			if err := d.rdr.Err(); err != nil {
				return err
			}
			return fmt.Errorf("column %d ended %d rows early", d.c.leaf, n-from)
		}
		if d.maxDef > 0 {
			for i, l := range defs[:lvls] {
				d.valid[from+i] = l == d.maxDef
			}
		}
		got(from, int(lvls), values)
		from += int(lvls)
	}
	return nil
}

// skip passes over the next n rows.
func (d *directColumn) skip(n int) error {
	// Every typed column reader skips rows this way.
	s, ok := d.rdr.(interface{ Skip(int64) (int64, error) })
	if !ok {
		return fmt.Errorf("column %d: no direct reader for %T", d.c.leaf, d.rdr)
	}
	_, err := s.Skip(int64(n))
	return err
}

// appendInts appends the kept rows of the integer values last read to b.
func (d *directColumn) appendInts(keep []bool, b array.Builder) {
	for i, k := range keep {
		if !k {
			continue
		}
		if d.maxDef > 0 && !d.valid[i] {
			b.AppendNull()
			continue
		}
		appendInt(b, d.ints[i])
	}
}

func appendInt(b array.Builder, v int64) {
	switch b := b.(type) {
	case *array.Int64Builder:
		b.Append(v)
	case *array.Int32Builder:
		b.Append(int32(v))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v))
	}
}

// pick decodes the next n rows and appends the kept ones to b.
func (d *directColumn) pick(n int, keep []bool, b array.Builder) error {
	if d.intLike() {
		if err := d.readInts(n); err != nil {
			return err
		}
		d.appendInts(keep[:n], b)
		return nil
	}
	return d.read(n, func(from, lvls, values int) {
		v := 0
		for i := range lvls {
			present := d.maxDef == 0 || d.defs[i] == d.maxDef
			if keep[from+i] {
				if present {
					d.appendValue(b, v)
				} else {
					b.AppendNull()
				}
			}
			if present {
				v++
			}
		}
	})
}

// appendValue appends the v-th value of the last page part read to b.
func (d *directColumn) appendValue(b array.Builder, v int) {
	switch b := b.(type) {
	case *array.StringBuilder:
		b.BinaryBuilder.Append(d.bytes[v])
	case *array.BinaryBuilder:
		b.Append(d.bytes[v])
	case *array.Float32Builder:
		b.Append(d.f32[v])
	case *array.Float64Builder:
		if d.f32 != nil {
			b.Append(float64(d.f32[v]))
		} else {
			b.Append(d.f64[v])
		}
	case *array.BooleanBuilder:
		b.Append(d.bools[v])
	}
}
