package planner

import (
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
)

// intSet is a valueSet of an integer-like type (int, long, date, time,
// timestamps) as closed intervals of int64, so that a filter tests the rows
// of a column without boxing each value: an IN list of 10,000 keys over a
// million entries is a binary search on a slice per row.
type intSet struct {
	null   bool
	lo, hi []int64 // sorted, disjoint, inclusive
}

func isIntLike(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.Int32Type, iceberg.Int64Type, iceberg.DateType, iceberg.TimeType, iceberg.TimestampType,
		iceberg.TimestampTzType, iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return true
	}
	return false
}

func asInt64(v any) int64 {
	if x, ok := v.(int32); ok {
		return int64(x)
	}
	return v.(int64)
}

// newIntSet converts a set of an integer-like type.
func newIntSet(s valueSet) (*intSet, bool) {
	if !isIntLike(s.typ) {
		return nil, false
	}
	out := &intSet{null: s.admitsNull()}
	for _, iv := range s.ivs {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if iv.lo.v != nil {
			lo = asInt64(iv.lo.v)
			if !iv.lo.incl {
				if lo == math.MaxInt64 {
					continue
				}
				lo++
			}
		}
		switch {
		case iv.hi.inf:
		case iv.hi.v == nil: // null only
			continue
		default:
			hi = asInt64(iv.hi.v)
			if !iv.hi.incl {
				if hi == math.MinInt64 {
					continue
				}
				hi--
			}
		}
		if lo <= hi {
			out.lo, out.hi = append(out.lo, lo), append(out.hi, hi)
		}
	}
	return out, true
}

func (s *intSet) contains(v int64) bool {
	i := sort.Search(len(s.hi), func(i int) bool { return s.hi[i] >= v })
	return i < len(s.hi) && s.lo[i] <= v
}

// applyInts tests the rows of an integer-like column against s, and
// reports false for a column layout it does not read.
func applyInts(s *intSet, col arrow.Array, keep []bool) bool {
	var valid []bool
	if col.NullN() > 0 {
		valid = make([]bool, col.Len())
		for i := range valid {
			valid[i] = col.IsValid(i)
		}
	}
	switch c := col.(type) {
	case *array.Int64:
		sweepInts(s, c.Int64Values(), valid, keep)
	case *array.Int32:
		sweepInts(s, c.Int32Values(), valid, keep)
	case *array.Date32:
		sweepInts(s, c.Date32Values(), valid, keep)
	case *array.Time64:
		sweepInts(s, c.Time64Values(), valid, keep)
	case *array.Timestamp:
		sweepInts(s, c.TimestampValues(), valid, keep)
	default:
		return false
	}
	return true
}

// sweepInts clears keep[i] for the rows whose value is not in s (valid,
// unless nil, says which rows are not null). Range files are sorted by the
// index key, so the leading key field ascends down a batch: while it
// does, one sweep walks the values and the intervals together; from a
// value out of order on, each value is searched for.
func sweepInts[T ~int32 | ~int64](s *intSet, vals []T, valid []bool, keep []bool) {
	k, prev, ascending := 0, int64(math.MinInt64), true
	for i, x := range vals[:len(keep)] {
		if !keep[i] {
			continue
		}
		if valid != nil && !valid[i] {
			keep[i] = s.null
			continue
		}
		v := int64(x)
		if ascending = ascending && v >= prev; !ascending {
			keep[i] = s.contains(v)
			continue
		}
		for k < len(s.hi) && s.hi[k] < v {
			k++
		}
		keep[i] = k < len(s.hi) && s.lo[k] <= v
		prev = v
	}
}

// stringPoints is a set of non-null strings, for IN lists of strings.
type stringPoints map[string]struct{}

func newStringPoints(s valueSet) (stringPoints, bool) {
	if _, ok := s.typ.(iceberg.StringType); !ok {
		return nil, false
	}
	pts, ok := s.points()
	if !ok {
		return nil, false
	}
	out := stringPoints{}
	for _, p := range pts {
		if p == nil {
			return nil, false
		}
		out[p.(string)] = struct{}{}
	}
	return out, true
}

func applyStrings(s stringPoints, col arrow.Array, keep []bool) bool {
	c, ok := col.(*array.String)
	if !ok {
		return false
	}
	for i := range keep {
		if keep[i] {
			_, in := s[c.Value(i)]
			keep[i] = in && c.IsValid(i)
		}
	}
	return true
}
