package format

import (
	"bytes"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// Values of index fields travel through streamidx as plain Go values, one
// canonical representation per Iceberg primitive type. A nil value is null.
//
//	boolean                      bool
//	int                          int32
//	long                         int64
//	float                        float32
//	double                       float64
//	decimal(P,S)                 decimal128.Num (the unscaled value; S comes from the type)
//	date                         int32 (days from 1970-01-01)
//	time                         int64 (microseconds from midnight)
//	timestamp, timestamptz       int64 (microseconds from the epoch)
//	timestamp_ns, timestamptz_ns int64 (nanoseconds from the epoch)
//	string                       string
//	uuid                         uuid.UUID
//	fixed[L], binary             []byte
//
// Key is a clustering key: the values of the cluster-spec fields, in order.
type Key []any

// CheckValue reports whether v has the canonical Go representation of t.
// Null (nil) is accepted for every type.
func CheckValue(t iceberg.Type, v any) error {
	if v == nil {
		return nil
	}
	ok := false
	switch t := t.(type) {
	case iceberg.BooleanType:
		_, ok = v.(bool)
	case iceberg.Int32Type, iceberg.DateType:
		_, ok = v.(int32)
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		_, ok = v.(int64)
	case iceberg.Float32Type:
		_, ok = v.(float32)
	case iceberg.Float64Type:
		_, ok = v.(float64)
	case iceberg.DecimalType:
		_, ok = v.(decimal128.Num)
	case iceberg.StringType:
		_, ok = v.(string)
	case iceberg.UUIDType:
		_, ok = v.(uuid.UUID)
	case iceberg.FixedType:
		var b []byte
		if b, ok = v.([]byte); ok && len(b) != t.Len() {
			return fmt.Errorf("value of %s has %d bytes", t, len(b))
		}
	case iceberg.BinaryType:
		_, ok = v.([]byte)
	default:
		return fmt.Errorf("type %s is not a primitive type that an index can order", t)
	}
	if !ok {
		return fmt.Errorf("value %v (%T) is not a %s", v, v, t)
	}
	return nil
}

// Compare orders two values of type t by the index spec's clustering order:
// null first; floats by -NaN < -Inf < ... < -0.0 < 0.0 < ... < Inf < NaN;
// strings, binary, fixed and uuid by unsigned bytes; false < true. It panics
// when a value does not have the canonical representation of t, which is a
// programming error.
func Compare(t iceberg.Type, a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch t.(type) {
	case iceberg.BooleanType:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		default:
			return 1
		}
	case iceberg.Int32Type, iceberg.DateType:
		return cmpOrdered(a.(int32), b.(int32))
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return cmpOrdered(a.(int64), b.(int64))
	case iceberg.Float32Type:
		return cmpOrdered(float32TotalOrder(a.(float32)), float32TotalOrder(b.(float32)))
	case iceberg.Float64Type:
		return cmpOrdered(float64TotalOrder(a.(float64)), float64TotalOrder(b.(float64)))
	case iceberg.DecimalType:
		return a.(decimal128.Num).Cmp(b.(decimal128.Num))
	case iceberg.StringType:
		return cmpOrdered(a.(string), b.(string)) // Go compares strings by unsigned bytes.
	case iceberg.UUIDType:
		x, y := a.(uuid.UUID), b.(uuid.UUID)
		return bytes.Compare(x[:], y[:])
	case iceberg.FixedType, iceberg.BinaryType:
		return bytes.Compare(a.([]byte), b.([]byte))
	}
	panic(fmt.Sprintf("format: compare values of unsupported type %s", t))
}

// CompareKeys orders two clustering keys of the given field types field by
// field, the first difference deciding.
func CompareKeys(types []iceberg.Type, a, b Key) int {
	for i, t := range types {
		if c := Compare(t, a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// float64TotalOrder maps a double to an integer with the same order as the
// spec's sort order for doubles. Flipping every bit of a negative value and
// only the sign bit of a positive one makes the IEEE 754 bit pattern compare
// as a signed integer: -NaN < -Inf < negatives < -0.0 < 0.0 < positives <
// Inf < NaN. It is also the basis of the key encoding (see README.md).
func float64TotalOrder(f float64) int64 {
	u := math.Float64bits(f)
	if u>>63 == 1 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return int64(u ^ (1 << 63))
}

func float32TotalOrder(f float32) int32 {
	u := math.Float32bits(f)
	if u>>31 == 1 {
		u = ^u
	} else {
		u |= 1 << 31
	}
	return int32(u ^ (1 << 31))
}

type ordered interface {
	~int32 | ~int64 | ~string
}

func cmpOrdered[T ordered](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// IsPrimitive reports whether t is a primitive type that an index can order
// and store: every Iceberg primitive except geometry, geography, variant and
// unknown.
func IsPrimitive(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.BooleanType, iceberg.Int32Type, iceberg.Int64Type, iceberg.Float32Type,
		iceberg.Float64Type, iceberg.DecimalType, iceberg.DateType, iceberg.TimeType,
		iceberg.TimestampType, iceberg.TimestampTzType, iceberg.TimestampNsType,
		iceberg.TimestampTzNsType, iceberg.StringType, iceberg.UUIDType, iceberg.FixedType,
		iceberg.BinaryType:
		return true
	}
	return false
}

// FormatValue renders a value of type t for people: the inspect and lookup
// commands and error messages. Dates and times are ISO 8601, decimals keep
// their scale, binary is hexadecimal.
func FormatValue(t iceberg.Type, v any) string {
	if v == nil {
		return "null"
	}
	switch t := t.(type) {
	case iceberg.DecimalType:
		return v.(decimal128.Num).ToString(int32(t.Scale()))
	case iceberg.DateType:
		return iceberg.Date(v.(int32)).ToTime().Format("2006-01-02")
	case iceberg.TimeType:
		us := v.(int64)
		return fmt.Sprintf("%02d:%02d:%02d.%06d", us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000)
	case iceberg.TimestampType:
		return iceberg.Timestamp(v.(int64)).ToTime().UTC().Format("2006-01-02T15:04:05.999999")
	case iceberg.TimestampTzType:
		return iceberg.Timestamp(v.(int64)).ToTime().UTC().Format("2006-01-02T15:04:05.999999Z07:00")
	case iceberg.TimestampNsType:
		return iceberg.TimestampNano(v.(int64)).ToTime().UTC().Format("2006-01-02T15:04:05.999999999")
	case iceberg.TimestampTzNsType:
		return iceberg.TimestampNano(v.(int64)).ToTime().UTC().Format("2006-01-02T15:04:05.999999999Z07:00")
	case iceberg.StringType:
		return v.(string)
	case iceberg.FixedType, iceberg.BinaryType:
		return fmt.Sprintf("0x%x", v.([]byte))
	}
	return fmt.Sprint(v)
}

// IsNaN reports whether v is a float or double NaN. Bounds leave NaN out.
func IsNaN(v any) bool {
	switch f := v.(type) {
	case float32:
		return math.IsNaN(float64(f))
	case float64:
		return math.IsNaN(f)
	}
	return false
}
