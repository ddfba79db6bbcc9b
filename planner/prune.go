package planner

import (
	"math"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// mayMatch reports whether a file or row group whose field has statistics
// st may hold a value of set. Bounds cover the non-null values other than
// NaN, as Iceberg's and Parquet's statistics do; nulls and NaNs are judged
// by their counts. Unknown metrics never prune.
func mayMatch(set valueSet, st *format.FieldStats) bool {
	if set.isEmpty() {
		return false
	}
	if st == nil {
		return true
	}
	if set.admitsNull() && (st.NullValueCount == nil || *st.NullValueCount > 0) {
		return true
	}
	if set.admitsNaN() && (st.NanValueCount == nil || *st.NanValueCount > 0) {
		return true
	}
	if st.LowerBound != nil && st.UpperBound != nil {
		lo, hi := widenZeros(set.typ, st.LowerBound, st.UpperBound)
		return set.overlaps(lo, hi)
	}
	// No bounds: prune only when the counts show there is no other value.
	if st.ValueCount == nil || st.NullValueCount == nil {
		return true
	}
	others := *st.ValueCount - *st.NullValueCount
	if isFloatType(set.typ) {
		if st.NanValueCount == nil {
			return true
		}
		others -= *st.NanValueCount
	}
	return others > 0
}

func isFloatType(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		return true
	}
	return false
}

// widenZeros makes float bounds at zero cover both zeros: Parquet writers
// may record 0.0 for -0.0 and back.
func widenZeros(t iceberg.Type, lo, hi any) (any, any) {
	switch t.(type) {
	case iceberg.Float64Type:
		if lo.(float64) == 0 {
			lo = math.Copysign(0, -1)
		}
		if hi.(float64) == 0 {
			hi = 0.0
		}
	case iceberg.Float32Type:
		if lo.(float32) == 0 {
			lo = float32(math.Copysign(0, -1))
		}
		if hi.(float32) == 0 {
			hi = float32(0)
		}
	}
	return lo, hi
}
