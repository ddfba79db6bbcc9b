package format

import (
	"cmp"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Range files are sorted by the index key, so the leading key field
// ascends down every block: a lookup of a few keys finds its rows by
// binary search instead of testing every row. A block checks the order
// once per field before it lets a reader rely on it, so a file written
// out of order costs speed, never a wrong answer.

// SeekInts returns the offsets, ascending, of the rows of the block whose
// value of the stored field fieldID lies in one of the closed intervals
// [lo[k], hi[k]] (ascending and disjoint). ok is false, and the caller
// must test the rows itself, unless the field is integer-like, read
// without conversion (an int widened to a long aside), null in no row and
// ascending down the block.
func (b *Block) SeekInts(fieldID int, lo, hi []int64) (rows []int64, ok bool) {
	if v, ok := b.ascendingInt64s[fieldID]; ok {
		return seekInt64s(v, lo, hi), true
	}
	v, ok := b.intValues(fieldID)
	if !ok {
		return nil, false
	}
	return seek(b, fieldID, v, lo, hi)
}

// SeekStrings is SeekInts for a string field and a set of values given in
// ascending byte order.
func (b *Block) SeekStrings(fieldID int, values []string) (rows []int64, ok bool) {
	v, ok := b.stringValues(fieldID)
	if !ok {
		return nil, false
	}
	return seek(b, fieldID, v, values, values)
}

// seek finds the rows whose value v(i) lies in one of the closed intervals
// [lo[k], hi[k]], when v ascends down the block.
func seek[T cmp.Ordered](b *Block, fieldID int, v func(int) T, lo, hi []T) ([]int64, bool) {
	if !b.ascending(fieldID, func(i int) bool { return v(i-1) <= v(i) }) {
		return nil, false
	}
	return seekSorted(int(b.NumRows()), v, lo, hi), true
}

// seekSorted finds the rows i < n whose value v(i), ascending with i, lies
// in one of the closed intervals [lo[k], hi[k]].
func seekSorted[T cmp.Ordered](n int, v func(int) T, lo, hi []T) []int64 {
	if n == 0 {
		return nil
	}
	first, last := v(0), v(n-1)
	var rows []int64
	// Only the intervals that reach into the block's span are searched.
	k := sort.Search(len(hi), func(k int) bool { return hi[k] >= first })
	for ; k < len(lo) && lo[k] <= last; k++ {
		start := sort.Search(n, func(i int) bool { return v(i) >= lo[k] })
		end := start + sort.Search(n-start, func(i int) bool { return v(start+i) > hi[k] })
		for i := start; i < end; i++ {
			rows = append(rows, int64(i))
		}
	}
	return rows
}

// seekInt64s is seek on a column of longs known to ascend (see
// ascendingInt64Columns): what a point lookup on a bigint key does,
// thousands of times a second in the lookup service, without testing the
// order and the column's type again on every call.
func seekInt64s(v []int64, lo, hi []int64) []int64 {
	return seekSorted(len(v), func(i int) int64 { return v[i] }, lo, hi)
}

// ascendingInt64Columns finds the block's columns of longs, read as the
// type readers get, null in no row and ascending down the block: those
// SeekInts searches as slices.
func (b *Block) ascendingInt64Columns() map[int][]int64 {
	var found map[int][]int64
	for id := range b.col {
		col, want, ok := b.column(id)
		c, isLong := col.(*array.Int64)
		if !ok || !isLong || !arrow.TypeEqual(col.DataType(), want) {
			continue
		}
		v := c.Int64Values()
		if !slices.IsSorted(v) {
			continue
		}
		if found == nil {
			found = map[int][]int64{}
		}
		found[id] = v
	}
	return found
}

// ascending reports, once per field, whether inOrder(i) holds for every
// row i > 0.
func (b *Block) ascending(fieldID int, inOrder func(i int) bool) bool {
	b.orderMu.Lock()
	defer b.orderMu.Unlock()
	if asc, ok := b.ordered[fieldID]; ok {
		return asc
	}
	asc := true
	for i := 1; i < int(b.NumRows()) && asc; i++ {
		asc = inOrder(i)
	}
	if b.ordered == nil {
		b.ordered = map[int]bool{}
	}
	b.ordered[fieldID] = asc
	return asc
}

// column is the block's column of a stored field with the Arrow type
// readers get for it, when it has no nulls.
func (b *Block) column(fieldID int) (arrow.Array, arrow.DataType, bool) {
	j, ok := b.col[fieldID]
	pos, stored := b.byID[fieldID]
	if !ok || !stored {
		return nil, nil, false
	}
	col := b.rec.Column(j)
	if col.NullN() > 0 {
		return nil, nil, false
	}
	return col, b.stored[pos].want.Type, true
}

func (b *Block) intValues(fieldID int) (func(int) int64, bool) {
	col, want, ok := b.column(fieldID)
	if !ok {
		return nil, false
	}
	if !arrow.TypeEqual(col.DataType(), want) && (col.DataType().ID() != arrow.INT32 || want.ID() != arrow.INT64) {
		return nil, false
	}
	switch c := col.(type) {
	case *array.Int64:
		return c.Value, true
	case *array.Int32:
		return func(i int) int64 { return int64(c.Value(i)) }, true
	case *array.Date32:
		return func(i int) int64 { return int64(c.Value(i)) }, true
	case *array.Time64:
		return func(i int) int64 { return int64(c.Value(i)) }, true
	case *array.Timestamp:
		return func(i int) int64 { return int64(c.Value(i)) }, true
	}
	return nil, false
}

// stringValues reads strings, plain or dictionary-encoded, without
// copying them.
func (b *Block) stringValues(fieldID int) (func(int) string, bool) {
	col, want, ok := b.column(fieldID)
	if !ok {
		return nil, false
	}
	if want.ID() != arrow.STRING && want.ID() != arrow.LARGE_STRING {
		return nil, false
	}
	plain := func(a arrow.Array) (func(int) string, bool) {
		switch c := a.(type) {
		case *array.String:
			return c.Value, true
		case *array.LargeString:
			return c.Value, true
		}
		return nil, false
	}
	if d, ok := col.(*array.Dictionary); ok {
		values, ok := plain(d.Dictionary())
		if !ok || d.Dictionary().NullN() > 0 {
			return nil, false
		}
		return func(i int) string { return values(d.GetValueIndex(i)) }, true
	}
	return plain(col)
}
