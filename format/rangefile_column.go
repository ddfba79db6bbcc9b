package format

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
)

// columnView reads one Arrow column of an index field. It compares rows
// in place, without boxing values, so that order checks and statistics
// allocate nothing per row; only values it hands out are boxed.
type columnView struct {
	typ   iceberg.Type
	arr   arrow.Array
	cmp   func(i, j int) int // rows i and j must not be null
	isNaN func(i int) bool   // nil unless the type is float or double
	// minMax, where the type has one, returns the rows of the smallest
	// and the largest non-null value (-1, -1 when there is none) in one
	// pass over the values themselves: statistics take most of a merge's
	// own time in the rows it passes through unchanged otherwise.
	minMax func() (lo, hi int)
	// descent, where the type has one, returns the first row below the
	// one before it (-1 when the rows ascend), for a column without nulls.
	descent func() int
}

// newColumnView wraps an array of the Arrow type that ArrowType gives for t.
func newColumnView(t iceberg.Type, arr arrow.Array) (columnView, error) {
	c := columnView{typ: t, arr: arr}
	switch a := arr.(type) {
	case *array.Boolean:
		c.cmp = func(i, j int) int { return cmpBool(a.Value(i), a.Value(j)) }
	case *array.Int32:
		c.cmp = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
		c.minMax = func() (int, int) { return minMaxRows(a.Int32Values(), a) }
		c.descent = func() int { return descentOf(a.Int32Values()) }
	case *array.Date32:
		c.cmp = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
		c.minMax = func() (int, int) { return minMaxRows(a.Date32Values(), a) }
		c.descent = func() int { return descentOf(a.Date32Values()) }
	case *array.Int64:
		c.cmp = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
		c.minMax = func() (int, int) { return minMaxRows(a.Int64Values(), a) }
		c.descent = func() int { return descentOf(a.Int64Values()) }
	case *array.Time64:
		c.cmp = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
		c.minMax = func() (int, int) { return minMaxRows(a.Values(), a) }
		c.descent = func() int { return descentOf(a.Values()) }
	case *array.Timestamp:
		c.cmp = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
		c.minMax = func() (int, int) { return minMaxRows(a.Values(), a) }
		c.descent = func() int { return descentOf(a.Values()) }
	case *array.Float32:
		c.cmp = func(i, j int) int {
			return cmp.Compare(float32TotalOrder(a.Value(i)), float32TotalOrder(a.Value(j)))
		}
		c.isNaN = func(i int) bool { return math.IsNaN(float64(a.Value(i))) }
	case *array.Float64:
		c.cmp = func(i, j int) int {
			return cmp.Compare(float64TotalOrder(a.Value(i)), float64TotalOrder(a.Value(j)))
		}
		c.isNaN = func(i int) bool { return math.IsNaN(a.Value(i)) }
	case *array.Decimal128:
		c.cmp = func(i, j int) int { return a.Value(i).Cmp(a.Value(j)) }
	case *array.String:
		c.cmp = func(i, j int) int { return strings.Compare(a.Value(i), a.Value(j)) }
		c.minMax = func() (int, int) { return minMaxStrings(a) }
		c.descent = func() int {
			for i := 1; i < a.Len(); i++ {
				if a.Value(i) < a.Value(i-1) {
					return i
				}
			}
			return -1
		}
	case *array.Binary:
		c.cmp = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	case *array.FixedSizeBinary:
		c.cmp = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	case *extensions.UUIDArray:
		storage := a.Storage().(*array.FixedSizeBinary)
		c.cmp = func(i, j int) int { return bytes.Compare(storage.Value(i), storage.Value(j)) }
	default:
		return columnView{}, fmt.Errorf("no ordering for Arrow type %s of %s", arr.DataType(), t)
	}
	return c, nil
}

// minMaxRows returns the rows of the smallest and the largest non-null of
// vals, the values of arr (-1, -1 when there is none).
func minMaxRows[T cmp.Ordered](vals []T, arr arrow.Array) (lo, hi int) {
	lo, hi = -1, -1
	noNulls := arr.NullN() == 0
	for i, v := range vals {
		if !noNulls && arr.IsNull(i) {
			continue
		}
		switch {
		case lo < 0:
			lo, hi = i, i
		case v < vals[lo]:
			lo = i
		case v > vals[hi]:
			hi = i
		}
	}
	return lo, hi
}

// descentOf returns the first index whose value is below the one before
// it, or -1.
func descentOf[T cmp.Ordered](vals []T) int {
	for i := 1; i < len(vals); i++ {
		if vals[i] < vals[i-1] {
			return i
		}
	}
	return -1
}

// minMaxStrings is minMaxRows for strings; a value equal to the one before
// it (a path repeated over the entries of one data file) is passed over
// with a comparison of equal bytes, which stops at the first difference.
func minMaxStrings(a *array.String) (lo, hi int) {
	lo, hi = -1, -1
	var loV, hiV, prev string
	havePrev := false
	for i := range a.Len() {
		if a.IsNull(i) {
			havePrev = false
			continue
		}
		v := a.Value(i)
		if havePrev && v == prev {
			continue
		}
		prev, havePrev = v, true
		switch {
		case lo < 0:
			lo, hi, loV, hiV = i, i, v, v
		case v < loV:
			lo, loV = i, v
		case v > hiV:
			hi, hiV = i, v
		}
	}
	return lo, hi
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// compareRows orders rows i and j by the clustering order: nulls first.
func (c columnView) compareRows(i, j int) int {
	ni, nj := c.arr.IsNull(i), c.arr.IsNull(j)
	switch {
	case ni && nj:
		return 0
	case ni:
		return -1
	case nj:
		return 1
	}
	return c.cmp(i, j)
}

// value returns row i as a canonical value that does not share memory with
// the array, so it may outlive the batch.
func (c columnView) value(i int) any {
	v := ValueAtAs(c.typ, c.arr, i)
	if s, ok := v.(string); ok {
		return strings.Clone(s)
	}
	return v
}

// compareKeyRows orders rows i and j of a batch by the clustering key whose
// fields are cols.
func compareKeyRows(cols []columnView, i, j int) int {
	for _, c := range cols {
		if r := c.compareRows(i, j); r != 0 {
			return r
		}
	}
	return 0
}

// keyAt returns the clustering key of row i.
func keyAt(cols []columnView, i int) Key {
	k := make(Key, len(cols))
	for n, c := range cols {
		k[n] = c.value(i)
	}
	return k
}

// statsAccumulator gathers the content statistics of one index field over
// the entries written to a range file. Bounds are the exact minimum and
// maximum under Compare of the non-null values, leaving NaN out as Iceberg
// does; NaN is counted instead.
type statsAccumulator struct {
	typ          iceberg.Type
	values       int64
	nulls        int64
	nans         int64
	lower, upper any
}

func (s *statsAccumulator) add(c columnView) {
	n := c.arr.Len()
	s.values += int64(n)
	s.nulls += int64(c.arr.NullN())
	lo, hi := -1, -1
	if c.minMax != nil {
		lo, hi = c.minMax()
	} else {
		for i := range n {
			if c.arr.IsNull(i) {
				continue
			}
			if c.isNaN != nil && c.isNaN(i) {
				s.nans++
				continue
			}
			switch {
			case lo < 0:
				lo, hi = i, i
			case c.cmp(i, lo) < 0:
				lo = i
			case c.cmp(i, hi) > 0:
				hi = i
			}
		}
	}
	if lo < 0 {
		return
	}
	if v := c.value(lo); s.lower == nil || Compare(s.typ, v, s.lower) < 0 {
		s.lower = v
	}
	if v := c.value(hi); s.upper == nil || Compare(s.typ, v, s.upper) > 0 {
		s.upper = v
	}
}

// stats returns the accumulated metrics. Bounds are tight: never truncated.
func (s *statsAccumulator) stats() *FieldStats {
	values, nulls := s.values, s.nulls
	st := &FieldStats{
		LowerBound:     s.lower,
		UpperBound:     s.upper,
		ValueCount:     &values,
		NullValueCount: &nulls,
	}
	if s.lower != nil {
		tight := true
		st.TightBounds = &tight
	}
	switch s.typ.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		nans := s.nans
		st.NanValueCount = &nans
	}
	return st
}
