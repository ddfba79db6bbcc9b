package planner

import (
	"slices"
	"sort"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// keyBound bounds clustering keys by a prefix of their fields: a key is at
// or above a lower bound when its first len(key) fields compare above the
// prefix, or equal and the bound is inclusive (and the same for upper
// bounds). The empty inclusive prefix admits every key.
type keyBound struct {
	key  format.Key
	incl bool
}

// keyRange is a range of clustering keys a match may have.
type keyRange struct {
	lo, hi keyBound
}

// cmpPrefix compares the first len(p) fields of key k with prefix p.
func cmpPrefix(types []iceberg.Type, k, p format.Key) int {
	return format.CompareKeys(types[:len(p)], k[:len(p)], p)
}

func (b keyBound) admitsAbove(types []iceberg.Type, k format.Key) bool {
	c := cmpPrefix(types, k, b.key)
	return c > 0 || (c == 0 && b.incl)
}

// admitsAfter reports whether some key strictly above prev is at or below
// upper bound b: the test of whether a range file, whose keys are above
// the previous file's group max prev, can hold keys of a range.
func (b keyBound) admitsAfter(types []iceberg.Type, prev format.Key) bool {
	c := cmpPrefix(types, prev, b.key)
	return c < 0 || (c == 0 && b.incl && len(b.key) < len(types))
}

// prefix is a partial clustering key being built field by field, with the
// source values it was derived from, so a later field computed from the
// same column takes the matching value rather than every admitted one.
type prefix struct {
	key   format.Key
	bound []binding
}

type binding struct {
	source int
	value  any
}

func (p prefix) value(source int) (any, bool) {
	for _, b := range p.bound {
		if b.source == source {
			return b.value, true
		}
	}
	return nil, false
}

func (p prefix) extend(v any, b ...binding) prefix {
	return prefix{key: append(slices.Clip(p.key), v), bound: append(slices.Clip(p.bound), b...)}
}

// keyRanges turns the admitted values of the cluster fields into ranges of
// clustering keys, as tight as the leading fields allow. Fields are taken
// in cluster order while each admits a list of values: a field derived
// from a column with a list of values takes each one's image (bucket(8,
// customer_id) then customer_id give (bucket(42), 42), not every pair); the
// first field that admits intervals ends the ranges; a field without
// conditions ends them before it. At most max ranges are made: beyond it
// the prefix stops growing, which only widens the ranges. No ranges at all
// means nothing matches.
func keyRanges(r *resolved, max int) []keyRange {
	types := r.is.ClusterTypes()
	prefixRanges := func(prefixes []prefix) []keyRange {
		out := make([]keyRange, len(prefixes))
		for i, p := range prefixes {
			out[i] = keyRange{lo: keyBound{key: p.key, incl: true}, hi: keyBound{key: p.key, incl: true}}
		}
		return sortRanges(types, out)
	}
	cluster := r.is.ClusterFields()
	prefixes := []prefix{{}}
	for _, f := range cluster {
		d, derived := r.derivs[f.ID]
		direct, hasDirect := r.direct[f.ID]
		keep := func(v any) bool { return !hasDirect || direct.contains(v) }
		if derived {
			if _, bound := prefixes[0].value(d.source); bound {
				next := make([]prefix, 0, len(prefixes))
				for _, p := range prefixes {
					src, _ := p.value(d.source)
					v, err := d.apply(src)
					if err != nil {
						return prefixRanges(prefixes)
					}
					if keep(v) {
						next = append(next, p.extend(v))
					}
				}
				if prefixes = next; len(prefixes) == 0 {
					return nil
				}
				continue
			}
			if pts, ok := sourcePoints(r, d.source); ok && len(prefixes)*len(pts) <= max {
				next := make([]prefix, 0, len(prefixes)*len(pts))
				for _, p := range prefixes {
					for _, pt := range pts {
						v, err := d.apply(pt)
						if err != nil {
							return prefixRanges(prefixes)
						}
						if keep(v) {
							next = append(next, p.extend(v, binding{d.source, pt}))
						}
					}
				}
				if prefixes = next; len(prefixes) == 0 {
					return nil
				}
				continue
			}
		}
		set, constrained := r.sets[f.ID]
		if !constrained || set.isFull() {
			return prefixRanges(prefixes)
		}
		if pts, ok := set.points(); ok {
			if len(prefixes)*len(pts) > max {
				return prefixRanges(prefixes)
			}
			next := make([]prefix, 0, len(prefixes)*len(pts))
			for _, p := range prefixes {
				for _, pt := range pts {
					next = append(next, p.extend(pt))
				}
			}
			if prefixes = next; len(prefixes) == 0 {
				return nil
			}
			continue
		}
		if len(prefixes)*len(set.ivs) > max {
			return prefixRanges(prefixes)
		}
		out := make([]keyRange, 0, len(prefixes)*len(set.ivs))
		for _, p := range prefixes {
			for _, iv := range set.ivs {
				kr := keyRange{lo: keyBound{key: p.extend(iv.lo.v).key, incl: iv.lo.incl}}
				if iv.hi.inf {
					kr.hi = keyBound{key: p.key, incl: true}
				} else {
					kr.hi = keyBound{key: p.extend(iv.hi.v).key, incl: iv.hi.incl}
				}
				out = append(out, kr)
			}
		}
		return sortRanges(types, out)
	}
	return prefixRanges(prefixes)
}

// sourcePoints returns the values a condition lists for a source column,
// when it lists values.
func sourcePoints(r *resolved, source int) ([]any, bool) {
	set, ok := r.src[source]
	if !ok {
		return nil, false
	}
	return set.points()
}

// sortRanges orders ranges by their lower bounds and drops duplicates,
// which a transform that maps many values to one makes.
func sortRanges(types []iceberg.Type, rs []keyRange) []keyRange {
	cmpBound := func(a, b keyBound) int {
		n := min(len(a.key), len(b.key))
		if c := format.CompareKeys(types[:n], a.key[:n], b.key[:n]); c != 0 {
			return c
		}
		if c := len(a.key) - len(b.key); c != 0 {
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
	slices.SortFunc(rs, func(a, b keyRange) int {
		if c := cmpBound(a.lo, b.lo); c != 0 {
			return c
		}
		return cmpBound(a.hi, b.hi)
	})
	return slices.CompactFunc(rs, func(a, b keyRange) bool { return cmpBound(a.lo, b.lo) == 0 && cmpBound(a.hi, b.hi) == 0 })
}

// fileChoice says which range files key pruning keeps: for each, the index
// of the first key range that reaches it, or -1.
func chooseFiles(types []iceberg.Type, groupMax []format.Key, ranges []keyRange) []int {
	why := make([]int, len(groupMax))
	for i := range why {
		why[i] = -1
	}
	for ri, kr := range ranges {
		// The first file whose last key is not below the range.
		first := sort.Search(len(groupMax), func(i int) bool { return kr.lo.admitsAbove(types, groupMax[i]) })
		for i := first; i < len(groupMax); i++ {
			if i > 0 && !kr.hi.admitsAfter(types, groupMax[i-1]) {
				break
			}
			if why[i] < 0 {
				why[i] = ri
			}
		}
	}
	return why
}

func formatRange(types []iceberg.Type, kr keyRange) string {
	if len(kr.lo.key) == 0 && len(kr.hi.key) == 0 {
		return "every key"
	}
	if kr.lo.incl && kr.hi.incl && len(kr.lo.key) == len(kr.hi.key) && format.CompareKeys(types[:len(kr.lo.key)], kr.lo.key, kr.hi.key) == 0 {
		if len(kr.lo.key) == len(types) {
			return "key " + formatKey(types, kr.lo.key)
		}
		return "keys starting " + formatKey(types, kr.lo.key)
	}
	var b strings.Builder
	switch {
	case len(kr.lo.key) == 0:
		b.WriteString("[-∞")
	case kr.lo.incl:
		b.WriteString("[" + formatKey(types, kr.lo.key))
	default:
		b.WriteString("(" + formatKey(types, kr.lo.key))
	}
	b.WriteString(" .. ")
	switch {
	case len(kr.hi.key) == 0:
		b.WriteString("+∞]")
	case !kr.hi.incl:
		b.WriteString(formatKey(types, kr.hi.key) + ")")
	case len(kr.hi.key) < len(types):
		b.WriteString(formatKey(types, kr.hi.key) + ", *]")
	default:
		b.WriteString(formatKey(types, kr.hi.key) + "]")
	}
	return b.String()
}

func formatKey(types []iceberg.Type, k format.Key) string {
	parts := make([]string, len(k))
	for i, v := range k {
		parts[i] = format.FormatValue(types[i], v)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
