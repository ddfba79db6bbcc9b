package tablescan

import (
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// denseInts is a set of integers held as one bit each over
// [base, base+64*len(words)): what a union of many equality delete files'
// integer keys becomes when the keys lie close together (see mergeInts).
// Building it is one bit set per key of every input, however many inputs
// there are; testing a key is one shift and one mask.
type denseInts struct {
	base, last uint64 // the least and the greatest key held
	words      []uint64
	n          uint64 // keys held
}

func (d *denseInts) contains(v uint64) bool {
	if v < d.base {
		return false
	}
	i := v - d.base
	w := i >> 6
	return w < uint64(len(d.words)) && d.words[w]&(1<<(i&63)) != 0
}

// each calls fn with every key held, ascending.
func (d *denseInts) each(fn func(uint64)) {
	for w, word := range d.words {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			fn(d.base + uint64(w)<<6 + uint64(b))
			word &= word - 1
		}
	}
}

// denseSpread is how many integers of range a dense union may cover for
// each key its inputs hold: at 16 its bitmap takes no more memory than the
// inputs' sorted arrays of 16-bit values, the form roaring keeps sparse
// containers in.
const denseSpread = 16

// mergeInts returns the union of the integer keys of sets. Roaring's own
// unions of many bitmaps fold them in one at a time, and each fold of a
// sparse container copies the union so far: merging the equality deletes
// of 120 upsert commits of 10,000 keys spread over 10M took 57-63 ms a
// merge (BenchmarkMergeSets; 10-12 ms as below), and an update of a CDC table with a long history merged once for
// each data file (a bucketed index's update at 10M spent 5 of its 24 CPU
// seconds there). When the keys lie within denseSpread times their count
// of one another (an upsert table's ids, handed out in order), the union is
// a dense bitmap built by setting one bit per key; otherwise it is
// roaring's union.
func mergeInts(sets []*EqualityDeletes) (*roaring64.Bitmap, *denseInts) {
	var lo, hi, total uint64
	for _, set := range sets {
		n := set.intsLen()
		if n == 0 {
			continue
		}
		smin, smax := set.intsRange()
		if total == 0 || smin < lo {
			lo = smin
		}
		hi = max(hi, smax)
		total += n
	}
	if total == 0 {
		return roaring64.New(), nil
	}
	if (hi-lo)/denseSpread >= total {
		bitmaps := make([]*roaring64.Bitmap, 0, len(sets))
		for _, set := range sets {
			bitmaps = append(bitmaps, set.roaringView())
		}
		return roaring64.FastOr(bitmaps...), nil
	}
	d := &denseInts{base: lo, last: hi, words: make([]uint64, (hi-lo)/64+1)}
	set1 := func(v uint64) {
		i := v - lo
		d.words[i>>6] |= 1 << (i & 63)
	}
	buf := make([]uint64, 4096)
	for _, set := range sets {
		switch {
		case set.dense != nil:
			set.dense.each(set1)
		case set.ints != nil:
			it := set.ints.ManyIterator()
			for n := it.NextMany(buf); n > 0; n = it.NextMany(buf) {
				for _, v := range buf[:n] {
					set1(v)
				}
			}
		}
	}
	for _, w := range d.words {
		d.n += uint64(bits.OnesCount64(w))
	}
	return nil, d
}

// roaringInts returns the set's integers as a roaring bitmap to add to,
// moving a dense set's integers into one first.
func (e *EqualityDeletes) roaringInts() *roaring64.Bitmap {
	if e.dense != nil {
		e.ints, e.dense = e.roaringView(), nil
	}
	return e.ints
}

// roaringView returns the set's integers as a roaring bitmap, without
// changing the set.
func (e *EqualityDeletes) roaringView() *roaring64.Bitmap {
	if e.dense == nil {
		return e.ints
	}
	out := roaring64.New()
	buf := make([]uint64, 0, 4096)
	e.dense.each(func(v uint64) {
		if buf = append(buf, v); len(buf) == cap(buf) {
			out.AddMany(buf)
			buf = buf[:0]
		}
	})
	out.AddMany(buf)
	return out
}

func (e *EqualityDeletes) containsInt(v uint64) bool {
	if e.dense != nil {
		return e.dense.contains(v)
	}
	return e.ints.Contains(v)
}

func (e *EqualityDeletes) intsLen() uint64 {
	if e.dense != nil {
		return e.dense.n
	}
	return e.ints.GetCardinality()
}

// intsRange returns the least and greatest integer of a set that holds
// some.
func (e *EqualityDeletes) intsRange() (uint64, uint64) {
	if e.dense != nil {
		return e.dense.base, e.dense.last
	}
	return e.ints.Minimum(), e.ints.Maximum()
}
