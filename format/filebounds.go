package format

import (
	"encoding/binary"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// BoundValue decodes a column bound of a data or delete file, serialized in
// Iceberg's single-value binary form of the column's type when the file was
// written, into the canonical value (CheckValue) of t, the column's
// type now; nil when it cannot. Decoded are int, long (also a bound written
// as an int before the column was promoted), date, time, the timestamps,
// string and uuid. A string bound may be truncated, as the table spec
// allows, and still bounds the values: a truncated lower bound is below
// every value, an upper bound above.
func BoundValue(t iceberg.Type, b []byte) any {
	switch t.(type) {
	case iceberg.Int32Type, iceberg.DateType:
		if len(b) == 4 {
			return int32(binary.LittleEndian.Uint32(b))
		}
	case iceberg.Int64Type:
		switch len(b) {
		case 8:
			return int64(binary.LittleEndian.Uint64(b))
		case 4: // written as an int before the column became a long
			return int64(int32(binary.LittleEndian.Uint32(b)))
		}
	case iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType, iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		if len(b) == 8 {
			return int64(binary.LittleEndian.Uint64(b))
		}
	case iceberg.StringType:
		return string(b)
	case iceberg.UUIDType:
		if u, err := uuid.FromBytes(b); err == nil {
			return u
		}
	}
	return nil
}

// FileBounds returns the bounds of column id in file f's metrics, decoded
// as type t, and whether the column may hold nulls there (true when f does
// not say).
func FileBounds(f iceberg.DataFile, id int, t iceberg.Type) (lower, upper any, nulls bool) {
	n, ok := f.NullValueCounts()[id]
	nulls = !ok || n > 0
	lo, okLo := f.LowerBoundValues()[id]
	hi, okHi := f.UpperBoundValues()[id]
	if !okLo || !okHi {
		return nil, nil, nulls
	}
	lower, upper = BoundValue(t, lo), BoundValue(t, hi)
	if lower == nil || upper == nil {
		return nil, nil, nulls
	}
	return lower, upper, nulls
}
