package format

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/murmur3"
)

// Columns is a batch of source rows seen column by column, so index fields
// can be evaluated a batch at a time. RecordColumns adapts a record batch.
type Columns interface {
	// Len is the number of rows in the batch.
	Len() int
	// Column returns the column of field id (a source field or a metadata
	// column). It belongs to the Columns and stays valid while the batch
	// does; a caller that keeps it longer retains it.
	Column(id int) (arrow.Array, error)
}

// Evaluate computes an index expression for every row of a batch and returns
// a new array of Arrow type ArrowType(t), which the caller must release. A
// null input row gives a null output row. Transforms run as typed loops over
// the column's buffers; decimals and unusual layouts (dictionaries, views)
// go value by value through TransformValue, so both always agree.
//
// The source types are read from the columns' Arrow types. The result may be
// promoted to t the way Iceberg promotes types (int to long, float to
// double, decimal to a wider precision, fixed[16] storage to uuid), and large
// offsets and other time zone labels are converted; any other difference
// between the expression's type and t is an error.
func Evaluate(mem memory.Allocator, e Expr, t iceberg.Type, cols Columns) (arrow.Array, error) {
	arr, got, err := evaluate(mem, e, cols)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", e, err)
	}
	defer arr.Release()
	out, err := conform(mem, arr, got, t)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", e, err)
	}
	return out, nil
}

func evaluate(mem memory.Allocator, e Expr, cols Columns) (arrow.Array, iceberg.Type, error) {
	switch e := e.(type) {
	case Ref:
		col, err := cols.Column(e.ID)
		if err != nil {
			return nil, nil, err
		}
		if col.Len() != cols.Len() {
			return nil, nil, fmt.Errorf("column of field %d has %d rows, the batch %d", e.ID, col.Len(), cols.Len())
		}
		t, err := icebergTypeOf(col.DataType())
		if err != nil {
			return nil, nil, fmt.Errorf("column of field %d: %w", e.ID, err)
		}
		col.Retain()
		return col, t, nil
	case Apply:
		c, err := parseCall(e)
		if err != nil {
			return nil, nil, err
		}
		arg, src, err := evaluate(mem, c.arg, cols)
		if err != nil {
			return nil, nil, err
		}
		defer arg.Release()
		result, err := transformResult(c.name, src)
		if err != nil {
			return nil, nil, err
		}
		out, err := applyTransform(mem, c, src, result, arg)
		if err != nil {
			return nil, nil, err
		}
		return out, result, nil
	case Lit:
		return nil, nil, fmt.Errorf("literal %s is not a value; literals are only transform parameters", e)
	}
	return nil, nil, fmt.Errorf("unknown expression %T", e)
}

// icebergTypeOf names the Iceberg type whose values an Arrow column holds,
// for every layout that ValueAt reads.
func icebergTypeOf(dt arrow.DataType) (iceberg.Type, error) {
	switch dt := dt.(type) {
	case *arrow.BooleanType:
		return iceberg.PrimitiveTypes.Bool, nil
	case *arrow.Int32Type:
		return iceberg.PrimitiveTypes.Int32, nil
	case *arrow.Int64Type:
		return iceberg.PrimitiveTypes.Int64, nil
	case *arrow.Float32Type:
		return iceberg.PrimitiveTypes.Float32, nil
	case *arrow.Float64Type:
		return iceberg.PrimitiveTypes.Float64, nil
	case *arrow.Decimal128Type:
		return iceberg.DecimalTypeOf(int(dt.Precision), int(dt.Scale)), nil
	case *arrow.Date32Type:
		return iceberg.PrimitiveTypes.Date, nil
	case *arrow.Time64Type:
		if dt.Unit == arrow.Microsecond {
			return iceberg.PrimitiveTypes.Time, nil
		}
	case *arrow.TimestampType:
		switch {
		case dt.Unit == arrow.Microsecond && dt.TimeZone == "":
			return iceberg.PrimitiveTypes.Timestamp, nil
		case dt.Unit == arrow.Microsecond:
			return iceberg.PrimitiveTypes.TimestampTz, nil
		case dt.Unit == arrow.Nanosecond && dt.TimeZone == "":
			return iceberg.PrimitiveTypes.TimestampNs, nil
		case dt.Unit == arrow.Nanosecond:
			return iceberg.PrimitiveTypes.TimestampTzNs, nil
		}
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return iceberg.PrimitiveTypes.String, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return iceberg.PrimitiveTypes.Binary, nil
	case *arrow.FixedSizeBinaryType:
		return iceberg.FixedTypeOf(dt.ByteWidth), nil
	case *extensions.UUIDType:
		return iceberg.PrimitiveTypes.UUID, nil
	case *arrow.DictionaryType:
		return icebergTypeOf(dt.ValueType)
	case arrow.ExtensionType:
		return icebergTypeOf(dt.StorageType())
	}
	return nil, fmt.Errorf("column type %s holds no Iceberg primitive type", dt)
}

// applyTransform runs one transform over a column of type src. The typed
// kernels return nil for layouts they do not cover, which then go value by
// value.
func applyTransform(mem memory.Allocator, c call, src, result iceberg.Type, arr arrow.Array) (arrow.Array, error) {
	switch c.name {
	case fnIdentity:
		arr.Retain()
		return arr, nil
	}
	storage := arr
	if ext, ok := arr.(array.ExtensionArray); ok {
		storage = ext.Storage()
	}
	var out arrow.Array
	var err error
	switch c.name {
	case fnBucket:
		out = bucketArray(mem, uint32(c.param), src, storage)
	case fnTruncate:
		out, err = truncateArray(mem, c.param, storage)
	default:
		out = timeArray(mem, c.name, src, storage)
	}
	if err != nil || out != nil {
		return out, err
	}
	return perValue(mem, c, src, result, arr)
}

// perValue is the slow path: canonical values through TransformValue.
func perValue(mem memory.Allocator, c call, src, result iceberg.Type, arr arrow.Array) (arrow.Array, error) {
	dt, err := ArrowType(result)
	if err != nil {
		return nil, err
	}
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	b.Reserve(arr.Len())
	for i := range arr.Len() {
		v, err := TransformValue(c.name, c.param, src, ValueAtAs(src, arr, i))
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if err := AppendValue(b, v); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	return b.NewArray(), nil
}

// bucketArray hashes every row of the column as BucketHash does.
func bucketArray(mem memory.Allocator, n uint32, src iceberg.Type, arr arrow.Array) arrow.Array {
	var fill func(out []int32)
	switch a := arr.(type) {
	case *array.Int32:
		fill = func(out []int32) { bucketInts(out, a.Int32Values(), n) }
	case *array.Date32:
		fill = func(out []int32) { bucketInts(out, a.Date32Values(), n) }
	case *array.Int64:
		fill = func(out []int32) { bucketInts(out, a.Int64Values(), n) }
	case *array.Time64:
		fill = func(out []int32) { bucketInts(out, a.Time64Values(), n) }
	case *array.Timestamp:
		if isNanos(src) {
			fill = func(out []int32) {
				for i, v := range a.TimestampValues() {
					out[i] = bucketOf(hashLong(floorDiv(int64(v), 1000)), n)
				}
			}
		} else {
			fill = func(out []int32) { bucketInts(out, a.TimestampValues(), n) }
		}
	case *array.Decimal128:
		fill = func(out []int32) {
			var buf [16]byte
			for i, v := range a.Values() {
				out[i] = bucketOf(murmur3.Sum32(decimalHashBytes(v, &buf)), n)
			}
		}
	case *array.String:
		fill = func(out []int32) { bucketVarlen(out, a.ValueOffsets(), valueBuffer(a), n) }
	case *array.LargeString:
		fill = func(out []int32) { bucketVarlen(out, a.ValueOffsets(), valueBuffer(a), n) }
	case *array.Binary:
		fill = func(out []int32) { bucketVarlen(out, a.ValueOffsets(), valueBuffer(a), n) }
	case *array.LargeBinary:
		fill = func(out []int32) { bucketVarlen(out, a.ValueOffsets(), valueBuffer(a), n) }
	case *array.FixedSizeBinary:
		fill = func(out []int32) {
			for i := range out {
				out[i] = bucketOf(murmur3.Sum32(a.Value(i)), n)
			}
		}
	default:
		return nil
	}
	return int32Result(mem, arrow.PrimitiveTypes.Int32, arr, fill)
}

// bucketInts hashes integers, dates, times and microsecond timestamps,
// which all hash as longs.
func bucketInts[T ~int32 | ~int64](out []int32, values []T, n uint32) {
	for i, v := range values {
		out[i] = bucketOf(hashLong(int64(v)), n)
	}
}

func bucketVarlen[O int32 | int64](out []int32, offsets []O, data []byte, n uint32) {
	for i := range out {
		out[i] = bucketOf(murmur3.Sum32(data[offsets[i]:offsets[i+1]]), n)
	}
}

// valueBuffer is the data buffer of a string or binary array; offsets index
// into it.
func valueBuffer(a arrow.Array) []byte {
	if b := a.Data().Buffers()[2]; b != nil {
		return b.Bytes()
	}
	return nil
}

func isNanos(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return true
	}
	return false
}

// truncateArray truncates integers, strings and binaries; decimals take the
// per-value path.
func truncateArray(mem memory.Allocator, w int, arr arrow.Array) (arrow.Array, error) {
	switch a := arr.(type) {
	case *array.Int32:
		return int32Result(mem, arr.DataType(), arr, func(out []int32) {
			for i, v := range a.Int32Values() {
				out[i] = truncateInt32(v, int32(w))
			}
		}), nil
	case *array.Int64:
		values := memory.NewResizableBuffer(mem)
		values.Resize(arrow.Int64Traits.BytesRequired(arr.Len()))
		out := arrow.Int64Traits.CastFromBytes(values.Bytes())
		for i, v := range a.Int64Values() {
			out[i] = truncateInt64(v, int64(w))
		}
		return fixedWidthResult(mem, arr.DataType(), arr, values), nil
	case *array.String:
		return truncateVarlen(mem, arrow.BinaryTypes.String, arr, a.ValueOffsets(), valueBuffer(a), w, true)
	case *array.LargeString:
		return truncateVarlen(mem, arrow.BinaryTypes.String, arr, a.ValueOffsets(), valueBuffer(a), w, true)
	case *array.Binary:
		return truncateVarlen(mem, arrow.BinaryTypes.Binary, arr, a.ValueOffsets(), valueBuffer(a), w, false)
	case *array.LargeBinary:
		return truncateVarlen(mem, arrow.BinaryTypes.Binary, arr, a.ValueOffsets(), valueBuffer(a), w, false)
	}
	return nil, nil
}

// truncateVarlen writes the prefixes of the values, at most l code points
// (utf8) or l bytes each, into a new array with 32-bit offsets.
func truncateVarlen[O int32 | int64](mem memory.Allocator, dt arrow.DataType, in arrow.Array, offsets []O, data []byte, l int, utf8 bool) (arrow.Array, error) {
	n := in.Len()
	capacity := min(int64(offsets[n]-offsets[0]), int64(n)*int64(l)*4)
	if capacity > math.MaxInt32 {
		return nil, fmt.Errorf("truncate: %d bytes of prefixes do not fit 32-bit offsets", capacity)
	}
	offsetBuf := memory.NewResizableBuffer(mem)
	offsetBuf.Resize(arrow.Int32Traits.BytesRequired(n + 1))
	outOffsets := arrow.Int32Traits.CastFromBytes(offsetBuf.Bytes())
	dataBuf := memory.NewResizableBuffer(mem)
	dataBuf.Resize(int(capacity))
	outData := dataBuf.Bytes()
	validity, validOffset := in.NullBitmapBytes(), in.Data().Offset()
	hasNulls := in.NullN() > 0
	pos := 0
	outOffsets[0] = 0
	for i := range n {
		if !hasNulls || bitutil.BitIsSet(validity, validOffset+i) {
			v := data[offsets[i]:offsets[i+1]]
			k := min(len(v), l)
			if utf8 {
				k = truncatedLen(v, l)
			}
			pos += copy(outData[pos:], v[:k])
		}
		outOffsets[i+1] = int32(pos)
	}
	dataBuf.ResizeNoShrink(pos)
	validBuf := copyValidity(mem, in)
	d := array.NewData(dt, n, []*memory.Buffer{validBuf, offsetBuf, dataBuf}, nil, in.NullN(), 0)
	releaseBuffers(validBuf, offsetBuf, dataBuf)
	defer d.Release()
	return array.MakeFromData(d), nil
}

// timeArray applies year, month, day or hour to a date or timestamp column.
func timeArray(mem memory.Allocator, fn string, src iceberg.Type, arr arrow.Array) arrow.Array {
	switch a := arr.(type) {
	case *array.Date32:
		if fn == fnDay {
			arr.Retain()
			return arr
		}
		return int32Result(mem, arrow.PrimitiveTypes.Int32, arr, func(out []int32) {
			for i, v := range a.Date32Values() {
				out[i] = dateTransform(fn, int64(v))
			}
		})
	case *array.Timestamp:
		perHour, perDay := int64(microsPerHour), int64(microsPerDay)
		if isNanos(src) {
			perHour, perDay = nanosPerHour, nanosPerDay
		}
		var dt arrow.DataType = arrow.PrimitiveTypes.Int32
		if fn == fnDay {
			dt = arrow.FixedWidthTypes.Date32
		}
		return int32Result(mem, dt, arr, func(out []int32) {
			values := a.TimestampValues()
			switch fn {
			case fnHour:
				for i, v := range values {
					out[i] = int32(floorDiv(int64(v), perHour))
				}
			case fnDay:
				for i, v := range values {
					out[i] = int32(floorDiv(int64(v), perDay))
				}
			default:
				for i, v := range values {
					out[i] = dateTransform(fn, floorDiv(int64(v), perDay))
				}
			}
		})
	}
	return nil
}

// int32Result builds an array of a 32-bit type (int32 or date32) with the
// validity of in and the values fill computes for every row; values under
// null rows are ignored.
func int32Result(mem memory.Allocator, dt arrow.DataType, in arrow.Array, fill func(out []int32)) arrow.Array {
	values := memory.NewResizableBuffer(mem)
	values.Resize(arrow.Int32Traits.BytesRequired(in.Len()))
	fill(arrow.Int32Traits.CastFromBytes(values.Bytes()))
	return fixedWidthResult(mem, dt, in, values)
}

// fixedWidthResult wraps a values buffer, taking over the caller's
// reference, into an array with the validity of in.
func fixedWidthResult(mem memory.Allocator, dt arrow.DataType, in arrow.Array, values *memory.Buffer) arrow.Array {
	validity := copyValidity(mem, in)
	d := array.NewData(dt, in.Len(), []*memory.Buffer{validity, values}, nil, in.NullN(), 0)
	releaseBuffers(validity, values)
	defer d.Release()
	return array.MakeFromData(d)
}

// copyValidity copies the validity bitmap of in to a new buffer starting at
// bit 0, or returns nil when in has no nulls.
func copyValidity(mem memory.Allocator, in arrow.Array) *memory.Buffer {
	if in.NullN() == 0 {
		return nil
	}
	n := in.Len()
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	bitutil.CopyBitmap(in.NullBitmapBytes(), in.Data().Offset(), n, buf.Bytes(), 0)
	return buf
}

func releaseBuffers(bufs ...*memory.Buffer) {
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
}

// conform turns the array an expression produced, of Iceberg type got, into
// a new reference of the Arrow type of want.
func conform(mem memory.Allocator, arr arrow.Array, got, want iceberg.Type) (arrow.Array, error) {
	if !promotable(got, want) {
		return nil, fmt.Errorf("expression produces %s, want %s", got, want)
	}
	dt, err := ArrowType(want)
	if err != nil {
		return nil, err
	}
	have := arr.DataType()
	switch {
	case arrow.TypeEqual(have, dt):
		arr.Retain()
		return arr, nil
	case sameLayout(have, dt):
		d := arr.Data()
		nd := array.NewData(dt, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd), nil
	}
	if ext, ok := dt.(arrow.ExtensionType); ok && arrow.TypeEqual(have, ext.StorageType()) {
		return array.NewExtensionArrayWithStorage(ext, arr), nil
	}
	switch a := arr.(type) {
	case *array.LargeString:
		if dt.ID() == arrow.STRING {
			return narrowOffsets(mem, dt, a, a.ValueOffsets())
		}
	case *array.LargeBinary:
		if dt.ID() == arrow.BINARY {
			return narrowOffsets(mem, dt, a, a.ValueOffsets())
		}
	}
	return copyValues(mem, dt, want, arr)
}

// promotable reports whether values of type got can stand for values of
// type want: equal types, and the promotions of Iceberg schema evolution.
// A uuid column read without Arrow's uuid extension is fixed[16] storage.
func promotable(got, want iceberg.Type) bool {
	if got.Equals(want) {
		return true
	}
	switch g := got.(type) {
	case iceberg.Int32Type:
		_, ok := want.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := want.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		w, ok := want.(iceberg.DecimalType)
		return ok && w.Scale() == g.Scale() && w.Precision() >= g.Precision()
	case iceberg.FixedType:
		_, ok := want.(iceberg.UUIDType)
		return ok && g.Len() == 16
	}
	return false
}

// sameLayout reports whether two Arrow types differ only in labels that do
// not change the buffers: a timestamp's time zone, a decimal's precision.
func sameLayout(a, b arrow.DataType) bool {
	switch a := a.(type) {
	case *arrow.TimestampType:
		b, ok := b.(*arrow.TimestampType)
		return ok && a.Unit == b.Unit
	case *arrow.Decimal128Type:
		b, ok := b.(*arrow.Decimal128Type)
		return ok && a.Scale == b.Scale
	}
	return false
}

// narrowOffsets converts a large string or binary array to 32-bit offsets,
// sharing its data buffer.
func narrowOffsets(mem memory.Allocator, dt arrow.DataType, in arrow.Array, offsets []int64) (arrow.Array, error) {
	n := in.Len()
	base, end := offsets[0], offsets[n]
	if end-base > math.MaxInt32 {
		return nil, fmt.Errorf("%d bytes of %s values do not fit 32-bit offsets", end-base, dt)
	}
	offsetBuf := memory.NewResizableBuffer(mem)
	offsetBuf.Resize(arrow.Int32Traits.BytesRequired(n + 1))
	out := arrow.Int32Traits.CastFromBytes(offsetBuf.Bytes())
	for i, o := range offsets {
		out[i] = int32(o - base)
	}
	var dataBuf *memory.Buffer
	if b := in.Data().Buffers()[2]; b != nil {
		dataBuf = memory.SliceBuffer(b, int(base), int(end-base))
	}
	validity := copyValidity(mem, in)
	d := array.NewData(dt, n, []*memory.Buffer{validity, offsetBuf, dataBuf}, nil, in.NullN(), 0)
	releaseBuffers(validity, offsetBuf, dataBuf)
	defer d.Release()
	return array.MakeFromData(d), nil
}

// copyValues rebuilds a column value by value in the Arrow type dt of want,
// for layouts without a direct conversion (dictionaries, views) and for
// promotions.
func copyValues(mem memory.Allocator, dt arrow.DataType, want iceberg.Type, arr arrow.Array) (arrow.Array, error) {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	b.Reserve(arr.Len())
	for i := range arr.Len() {
		v := ValueAtAs(want, arr, i)
		switch x := v.(type) {
		case int32:
			if _, long := want.(iceberg.Int64Type); long {
				v = int64(x)
			}
		case float32:
			if _, double := want.(iceberg.Float64Type); double {
				v = float64(x)
			}
		}
		if err := AppendValue(b, v); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	return b.NewArray(), nil
}
