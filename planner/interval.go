package planner

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// A valueSet is the set of values of one field that a predicate admits,
// as sorted, disjoint intervals in the index spec's order (format.Compare:
// null first, then -NaN < -Inf < ... < -0.0 < 0.0 < ... < Inf < NaN). The
// same sets decide which range files, row groups and rows a lookup reads
// and which rows it returns, so pruning and filtering cannot disagree.
//
// A lower bound with a nil value is the bottom: inclusive, it admits null;
// exclusive, it admits every value but null. An upper bound is either a
// value or the top (inf), which admits everything above.
type valueSet struct {
	typ iceberg.Type
	ivs []interval
}

type lowerBound struct {
	v    any
	incl bool
}

type upperBound struct {
	v    any
	incl bool
	inf  bool
}

type interval struct {
	lo lowerBound
	hi upperBound
}

var (
	belowAll    = lowerBound{v: nil, incl: true}  // admits null and everything above
	aboveNull   = lowerBound{v: nil, incl: false} // admits every value but null
	top         = upperBound{inf: true}
	nullOnly    = interval{lo: belowAll, hi: upperBound{v: nil, incl: true}}
	everything  = interval{lo: belowAll, hi: top}
	allNonNulls = interval{lo: aboveNull, hi: top}
)

func fullSet(t iceberg.Type) valueSet { return valueSet{typ: t, ivs: []interval{everything}} }

func pointInterval(v any) interval {
	return interval{lo: lowerBound{v: v, incl: true}, hi: upperBound{v: v, incl: true}}
}

// cmpLower orders lower bounds by where they start.
func cmpLower(t iceberg.Type, a, b lowerBound) int {
	if c := format.Compare(t, a.v, b.v); c != 0 {
		return c
	}
	switch {
	case a.incl == b.incl:
		return 0
	case a.incl:
		return -1
	}
	return 1
}

// cmpUpper orders upper bounds by where they end.
func cmpUpper(t iceberg.Type, a, b upperBound) int {
	switch {
	case a.inf && b.inf:
		return 0
	case a.inf:
		return 1
	case b.inf:
		return -1
	}
	if c := format.Compare(t, a.v, b.v); c != 0 {
		return c
	}
	switch {
	case a.incl == b.incl:
		return 0
	case a.incl:
		return 1
	}
	return -1
}

// admits reports whether value v (nil: null) is at or above lo.
func (lo lowerBound) admits(t iceberg.Type, v any) bool {
	c := format.Compare(t, v, lo.v)
	return c > 0 || (c == 0 && lo.incl)
}

// admits reports whether value v is at or below hi.
func (hi upperBound) admits(t iceberg.Type, v any) bool {
	if hi.inf {
		return true
	}
	c := format.Compare(t, v, hi.v)
	return c < 0 || (c == 0 && hi.incl)
}

func (iv interval) empty(t iceberg.Type) bool {
	if iv.hi.inf {
		return false
	}
	c := format.Compare(t, iv.lo.v, iv.hi.v)
	return c > 0 || (c == 0 && !(iv.lo.incl && iv.hi.incl))
}

func (iv interval) isPoint(t iceberg.Type) bool {
	return iv.lo.incl && iv.hi.incl && !iv.hi.inf && format.Compare(t, iv.lo.v, iv.hi.v) == 0
}

// newValueSet sorts and merges intervals into a set.
func newValueSet(t iceberg.Type, ivs []interval) valueSet {
	var out []interval
	for _, iv := range ivs {
		if !iv.empty(t) {
			out = append(out, iv)
		}
	}
	slices.SortFunc(out, func(a, b interval) int { return cmpLower(t, a.lo, b.lo) })
	merged := out[:0]
	for _, iv := range out {
		if n := len(merged); n > 0 && touches(t, merged[n-1].hi, iv.lo) {
			if cmpUpper(t, iv.hi, merged[n-1].hi) > 0 {
				merged[n-1].hi = iv.hi
			}
			continue
		}
		merged = append(merged, iv)
	}
	return valueSet{typ: t, ivs: merged}
}

// touches reports whether an interval ending at hi and one starting at lo
// (not before the first's start) overlap or meet.
func touches(t iceberg.Type, hi upperBound, lo lowerBound) bool {
	if hi.inf {
		return true
	}
	c := format.Compare(t, lo.v, hi.v)
	return c < 0 || (c == 0 && (lo.incl || hi.incl))
}

func (s valueSet) isEmpty() bool { return len(s.ivs) == 0 }

func (s valueSet) isFull() bool {
	return len(s.ivs) == 1 && s.ivs[0].lo == belowAll && s.ivs[0].hi.inf
}

// points returns the values of a set made only of single values, and
// whether it is one.
func (s valueSet) points() ([]any, bool) {
	out := make([]any, 0, len(s.ivs))
	for _, iv := range s.ivs {
		if !iv.isPoint(s.typ) {
			return nil, false
		}
		out = append(out, iv.lo.v)
	}
	return out, true
}

func (s valueSet) intersect(o valueSet) valueSet {
	var out []interval
	i, j := 0, 0
	for i < len(s.ivs) && j < len(o.ivs) {
		a, b := s.ivs[i], o.ivs[j]
		iv := interval{lo: a.lo, hi: a.hi}
		if cmpLower(s.typ, b.lo, iv.lo) > 0 {
			iv.lo = b.lo
		}
		if cmpUpper(s.typ, b.hi, iv.hi) < 0 {
			iv.hi = b.hi
		}
		if !iv.empty(s.typ) {
			out = append(out, iv)
		}
		if cmpUpper(s.typ, a.hi, b.hi) < 0 {
			i++
		} else {
			j++
		}
	}
	return valueSet{typ: s.typ, ivs: out}
}

// contains reports whether value v (nil: null) is in the set.
func (s valueSet) contains(v any) bool {
	// The first interval whose lower bound is above v; the one before it
	// is the only candidate.
	i := sort.Search(len(s.ivs), func(i int) bool { return !s.ivs[i].lo.admits(s.typ, v) })
	return i > 0 && s.ivs[i-1].hi.admits(s.typ, v)
}

// overlaps reports whether some value in [lo, hi] (non-null values, lo <=
// hi) is in the set.
func (s valueSet) overlaps(lo, hi any) bool {
	// The first interval that does not end below lo; intervals are
	// disjoint and sorted, so their upper bounds increase.
	i := sort.Search(len(s.ivs), func(i int) bool { return s.ivs[i].hi.admits(s.typ, lo) })
	return i < len(s.ivs) && s.ivs[i].lo.admits(s.typ, hi)
}

// admitsNull reports whether null is in the set.
func (s valueSet) admitsNull() bool { return s.contains(nil) }

// admitsNaN reports whether the set may hold a NaN of either sign: the
// values the spec orders above +Inf or between null and -Inf. Statistics
// leave NaN out of bounds, so pruning asks this separately. It errs
// towards true.
func (s valueSet) admitsNaN() bool {
	var negInf, posInf any
	switch s.typ.(type) {
	case iceberg.Float64Type:
		negInf, posInf = math.Inf(-1), math.Inf(1)
	case iceberg.Float32Type:
		negInf, posInf = float32(math.Inf(-1)), float32(math.Inf(1))
	default:
		return false
	}
	for _, iv := range s.ivs {
		if iv.hi.inf || format.Compare(s.typ, iv.hi.v, posInf) > 0 {
			return true
		}
		if format.Compare(s.typ, iv.lo.v, negInf) < 0 && format.Compare(s.typ, iv.hi.v, nil) > 0 {
			return true
		}
	}
	return false
}

func (s valueSet) String() string {
	if s.isFull() {
		return "any"
	}
	if s.isEmpty() {
		return "none"
	}
	parts := make([]string, len(s.ivs))
	for i, iv := range s.ivs {
		parts[i] = formatInterval(s.typ, iv)
	}
	return strings.Join(parts, " ∪ ")
}

func formatInterval(t iceberg.Type, iv interval) string {
	switch {
	case iv == nullOnly:
		return "{null}"
	case iv == allNonNulls:
		return "not null"
	case iv.isPoint(t):
		return "{" + format.FormatValue(t, iv.lo.v) + "}"
	}
	var b strings.Builder
	if iv.lo.incl {
		b.WriteByte('[')
	} else {
		b.WriteByte('(')
	}
	if iv.lo.v == nil {
		if iv.lo.incl {
			b.WriteString("null")
		} else {
			b.WriteString("-∞")
		}
	} else {
		b.WriteString(format.FormatValue(t, iv.lo.v))
	}
	b.WriteString(", ")
	switch {
	case iv.hi.inf:
		b.WriteString("+∞]")
	case iv.hi.incl:
		b.WriteString(format.FormatValue(t, iv.hi.v) + "]")
	default:
		b.WriteString(format.FormatValue(t, iv.hi.v) + ")")
	}
	return b.String()
}

// condSet is the set of values of type t that a condition admits. vals are
// its literals' values (never null). Comparisons never admit null.
//
// Floating point values follow SQL engines (PostgreSQL, Spark) rather than
// IEEE 754: -0.0 equals 0.0, every NaN equals every other NaN and is above
// every number, so `= 'NaN'` finds NaNs and `> 5` includes them. In the
// spec's order, where -NaN sorts first, that is a union of intervals.
func condSet(t iceberg.Type, op Op, vals []any) valueSet {
	switch op {
	case OpIsNull:
		return valueSet{typ: t, ivs: []interval{nullOnly}}
	case OpIsNotNull:
		return valueSet{typ: t, ivs: []interval{allNonNulls}}
	case OpBetween:
		return condSet(t, OpGe, vals[:1]).intersect(condSet(t, OpLe, vals[1:2]))
	case OpIn:
		var ivs []interval
		for _, v := range vals {
			ivs = append(ivs, condSet(t, OpEq, []any{v}).ivs...)
		}
		return newValueSet(t, ivs)
	}
	v := vals[0]
	if f, ok := floatOf(v); ok {
		return newValueSet(t, floatIntervals(t, op, f))
	}
	var iv interval
	switch op {
	case OpEq:
		iv = pointInterval(v)
	case OpLt:
		iv = interval{lo: aboveNull, hi: upperBound{v: v}}
	case OpLe:
		iv = interval{lo: aboveNull, hi: upperBound{v: v, incl: true}}
	case OpGt:
		iv = interval{lo: lowerBound{v: v}, hi: top}
	case OpGe:
		iv = interval{lo: lowerBound{v: v, incl: true}, hi: top}
	}
	return newValueSet(t, []interval{iv})
}

func floatOf(v any) (float64, bool) {
	switch f := v.(type) {
	case float64:
		return f, true
	case float32:
		return float64(f), true
	}
	return 0, false
}

// floatIntervals turns a comparison with a float into intervals of the
// spec's order: a range of numbers, where 0 stands for both zeros, plus the
// NaNs of both signs when NaN is admitted.
func floatIntervals(t iceberg.Type, op Op, f float64) []interval {
	val := func(x float64) any {
		if _, single := t.(iceberg.Float32Type); single {
			return float32(x)
		}
		return x
	}
	negZero, posZero := math.Copysign(0, -1), 0.0
	// The numbers admitted, [lo, hi] with the given inclusivity over the
	// reals and the infinities; none when lo is NaN.
	lo, loIncl := math.Inf(-1), true
	hi, hiIncl := math.Inf(1), true
	numbers, nan := true, false
	isNaN := math.IsNaN(f)
	switch op {
	case OpEq:
		if isNaN {
			numbers, nan = false, true
		} else {
			lo, hi = f, f
		}
	case OpLt:
		if !isNaN {
			hi, hiIncl = f, false
		}
	case OpLe:
		if isNaN {
			nan = true
		} else {
			hi = f
		}
	case OpGt:
		if isNaN {
			numbers = false
		} else {
			lo, loIncl, nan = f, false, true
		}
	case OpGe:
		if isNaN {
			numbers, nan = false, true
		} else {
			lo, nan = f, true
		}
	}
	var out []interval
	if numbers {
		// Both zeros are 0: an inclusive bound at 0 takes in -0.0 (below)
		// or 0.0 (above); an exclusive one leaves both out.
		if lo == 0 {
			if loIncl {
				lo = negZero
			} else {
				lo = posZero
			}
		}
		if hi == 0 {
			if hiIncl {
				hi = posZero
			} else {
				hi = negZero
			}
		}
		out = append(out, interval{lo: lowerBound{v: val(lo), incl: loIncl}, hi: upperBound{v: val(hi), incl: hiIncl}})
	}
	if nan {
		out = append(out,
			interval{lo: aboveNull, hi: upperBound{v: val(math.Inf(-1))}},
			interval{lo: lowerBound{v: val(math.Inf(1))}, hi: top})
	}
	return out
}
