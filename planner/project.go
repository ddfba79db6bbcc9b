package planner

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// step is one transform of an index expression, from the type of its
// argument to the type of its result. param is bucket's N or truncate's W.
type step struct {
	fn       string
	param    int
	src, res iceberg.Type
}

// derivation says how an index field's values come from one source column
// (or metadata column): the transforms applied to it, innermost first. An
// identity field, or an expression that is a bare reference, has none.
type derivation struct {
	source int
	steps  []step
}

// derive takes an index field's expression apart into a derivation, or
// reports false for an expression this package cannot follow (several
// columns, or a function it does not know): such a field is not projected.
func derive(f format.IndexField, fieldType func(int) (iceberg.Type, bool)) (derivation, bool) {
	if f.Kind == format.KindIdentity {
		return derivation{source: f.ID}, true
	}
	var steps []step
	e := f.Expr
	for {
		switch x := e.(type) {
		case format.Ref:
			src, ok := fieldType(x.ID)
			if !ok {
				return derivation{}, false
			}
			// steps were collected outermost first; types flow outwards.
			slices.Reverse(steps)
			for i := range steps {
				steps[i].src = src
				app := format.NewApply(steps[i].fn, paramArgs(steps[i], format.Ref{ID: x.ID})...)
				res, err := format.ResultType(app, func(int) (iceberg.Type, bool) { return src, true })
				if err != nil {
					return derivation{}, false
				}
				steps[i].res = res
				src = res
			}
			return derivation{source: x.ID, steps: steps}, true
		case format.Apply:
			if !x.Function.IsBuiltin() {
				return derivation{}, false
			}
			s := step{fn: x.Function.Name}
			switch s.fn {
			case "bucket", "truncate":
				if len(x.Args) != 2 {
					return derivation{}, false
				}
				lit, ok := x.Args[0].(format.Lit)
				if !ok {
					return derivation{}, false
				}
				n, err := lit.Int()
				if err != nil {
					return derivation{}, false
				}
				s.param, e = n, x.Args[1]
			case "identity", "year", "month", "day", "hour":
				if len(x.Args) != 1 {
					return derivation{}, false
				}
				e = x.Args[0]
			default:
				return derivation{}, false
			}
			steps = append(steps, s)
		default:
			return derivation{}, false
		}
	}
}

// paramArgs rebuilds a step's arguments around arg, to type-check it.
func paramArgs(s step, arg format.Expr) []format.Expr {
	if s.fn == "bucket" || s.fn == "truncate" {
		return []format.Expr{format.IntLit(s.param), arg}
	}
	return []format.Expr{arg}
}

// isIdentity reports whether the field holds the source column's values
// unchanged.
func (d derivation) isIdentity() bool {
	for _, s := range d.steps {
		if s.fn != "identity" {
			return false
		}
	}
	return true
}

// apply computes the field's value from a source value.
func (d derivation) apply(v any) (any, error) {
	for _, s := range d.steps {
		var err error
		if v, err = format.TransformValue(s.fn, s.param, s.src, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// project carries the set of admitted source values through the
// derivation's transforms, the way Iceberg projects a filter through a
// partition transform: the result holds the value of every admitted row,
// and as few others as the transform allows.
func (d derivation) project(set valueSet) valueSet {
	for _, s := range d.steps {
		set = s.project(set)
	}
	return set
}

func (s step) project(set valueSet) valueSet {
	switch s.fn {
	case "identity":
		return valueSet{typ: s.res, ivs: set.ivs}
	case "bucket":
		return s.projectPoints(set)
	}
	return s.projectMonotone(set)
}

// projectPoints maps each admitted value when the set is a list of values;
// otherwise any bucket may hold a match. Bucket does not keep order, so it
// answers = and IN only.
func (s step) projectPoints(set valueSet) valueSet {
	pts, ok := set.points()
	if !ok {
		if set.admitsNull() {
			return fullSet(s.res)
		}
		return valueSet{typ: s.res, ivs: []interval{allNonNulls}}
	}
	ivs := make([]interval, 0, len(pts))
	for _, p := range pts {
		v, err := format.TransformValue(s.fn, s.param, s.src, p)
		if err != nil {
			return fullSet(s.res)
		}
		ivs = append(ivs, pointInterval(v))
	}
	return newValueSet(s.res, ivs)
}

// projectMonotone maps intervals through an order-preserving transform g
// (truncate, year, month, day, hour): x <= y implies g(x) <= g(y). [a, b]
// maps to [g(a), g(b)]. An exclusive bound stays exclusive only where no
// value on the admitted side shares its image: a < b maps to g(x) < g(b)
// exactly when b starts its class (truncate(10) of 20; midnight for day),
// and a < x to g(a) < g(x) exactly when a ends its class.
func (s step) projectMonotone(set valueSet) valueSet {
	ivs := make([]interval, 0, len(set.ivs))
	for _, iv := range set.ivs {
		out := interval{lo: iv.lo, hi: iv.hi}
		if iv.lo.v != nil {
			g, err := format.TransformValue(s.fn, s.param, s.src, iv.lo.v)
			if err != nil {
				return fullSet(s.res)
			}
			out.lo = lowerBound{v: g, incl: iv.lo.incl || !s.endsClass(iv.lo.v, g)}
		}
		if !iv.hi.inf && iv.hi.v != nil {
			g, err := format.TransformValue(s.fn, s.param, s.src, iv.hi.v)
			if err != nil {
				return fullSet(s.res)
			}
			out.hi = upperBound{v: g, incl: iv.hi.incl || !s.startsClass(iv.hi.v, g)}
		}
		ivs = append(ivs, out)
	}
	return newValueSet(s.res, ivs)
}

// startsClass reports whether b is the least value whose image is g = g(b):
// then every x < b has g(x) < g. For truncated strings and binaries, b
// starts its class exactly when it is its own truncation.
func (s step) startsClass(b, g any) bool {
	switch b.(type) {
	case string, []byte:
		return format.Compare(s.src, b, g) == 0
	}
	prev, ok := adjacent(b, -1)
	if !ok {
		return false
	}
	gp, err := format.TransformValue(s.fn, s.param, s.src, prev)
	return err == nil && format.Compare(s.res, gp, g) != 0
}

// endsClass reports whether a is the greatest value whose image is g =
// g(a): then every x > a has g(x) > g. The successor of a string is the
// string with a 0x00 byte appended.
func (s step) endsClass(a, g any) bool {
	var next any
	switch v := a.(type) {
	case string:
		next = v + "\x00"
	case []byte:
		next = append(append([]byte(nil), v...), 0)
	default:
		var ok bool
		if next, ok = adjacent(a, 1); !ok {
			return false
		}
	}
	gn, err := format.TransformValue(s.fn, s.param, s.src, next)
	return err == nil && format.Compare(s.res, gn, g) != 0
}

// adjacent returns the value next to v (dir +1) or before it (dir -1) for
// the discrete types the order-preserving transforms accept: int, long,
// date, timestamps (their integer units) and decimals (the unscaled value).
func adjacent(v any, dir int64) (any, bool) {
	switch x := v.(type) {
	case int32:
		if (dir > 0 && x == math.MaxInt32) || (dir < 0 && x == math.MinInt32) {
			return nil, false
		}
		return x + int32(dir), true
	case int64:
		if (dir > 0 && x == math.MaxInt64) || (dir < 0 && x == math.MinInt64) {
			return nil, false
		}
		return x + dir, true
	case decimal128.Num:
		return x.Add(decimal128.FromI64(dir)), true
	}
	return nil, false
}

// describe renders a derivation for explain output: day(ts), bucket[8](id).
func (d derivation) describe(name string) string {
	out := name
	for _, s := range d.steps {
		switch s.fn {
		case "identity":
			continue
		case "bucket", "truncate":
			out = fmt.Sprintf("%s[%d](%s)", s.fn, s.param, out)
		default:
			out = fmt.Sprintf("%s(%s)", s.fn, out)
		}
	}
	return out
}
