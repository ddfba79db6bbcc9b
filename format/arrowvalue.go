package format

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// ValueAt returns row i of an Arrow array as the canonical Go value (see
// Key), or nil when the row is null. It accepts every Arrow layout that
// iceberg-go and Parquet readers produce for Iceberg primitives, including
// large and view strings and binaries, dictionaries and the uuid extension.
func ValueAt(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Decimal128:
		return a.Value(i)
	case *array.Date32:
		return int32(a.Value(i))
	case *array.Time64:
		return int64(a.Value(i))
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	case *array.Binary:
		return clone(a.Value(i))
	case *array.LargeBinary:
		return clone(a.Value(i))
	case *array.BinaryView:
		return clone(a.Value(i))
	case *extensions.UUIDArray:
		return uuid.UUID(a.Value(i))
	case *array.FixedSizeBinary:
		return clone(a.Value(i))
	case *array.Dictionary:
		return ValueAt(a.Dictionary(), a.GetValueIndex(i))
	case array.ExtensionArray:
		return ValueAt(a.Storage(), i)
	}
	panic(fmt.Sprintf("format: no value conversion for Arrow type %s", arr.DataType()))
}

// ValueAtAs is ValueAt for a column of Iceberg type t. It adapts the
// representations that differ between Iceberg types sharing an Arrow layout:
// a uuid stored as fixed_size_binary(16) becomes a uuid.UUID.
func ValueAtAs(t iceberg.Type, arr arrow.Array, i int) any {
	v := ValueAt(arr, i)
	if b, ok := v.([]byte); ok {
		if _, isUUID := t.(iceberg.UUIDType); isUUID && len(b) == 16 {
			return uuid.UUID(b)
		}
	}
	return v
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// AppendValue appends a canonical Go value (or null) to an Arrow builder of
// the matching type.
func AppendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.Decimal128Builder:
		b.Append(v.(decimal128.Num))
	case *array.Date32Builder:
		b.Append(arrow.Date32(v.(int32)))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v.(int64)))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v.(int64)))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.LargeStringBuilder:
		b.Append(v.(string))
	case *extensions.UUIDBuilder:
		b.Append(v.(uuid.UUID))
	case *array.FixedSizeBinaryBuilder:
		if u, ok := v.(uuid.UUID); ok {
			b.Append(u[:])
		} else {
			b.Append(v.([]byte))
		}
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	default:
		return fmt.Errorf("append %T to a %s builder: unsupported", v, b.Type())
	}
	return nil
}
