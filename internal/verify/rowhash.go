package verify

import (
	"hash/maphash"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// contentHash fingerprints the content of one row: two independently seeded
// 64-bit lanes, so that two different rows of a data file share a
// fingerprint with a chance of about 2^-128. Nothing outside one process
// sees it, so the seeds are random.
type contentHash [2]uint64

// rowHasher computes contentHashes column by column: one type switch per
// column of a batch, no allocation per value, where a fingerprint per row
// through strings and SHA-256 cost more than reading the data file.
type rowHasher struct {
	seeds [2]maphash.Seed
	words [2]uint64 // seeds for fixed-width values
}

func newRowHasher() *rowHasher {
	h := &rowHasher{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	for l := range h.words {
		h.words[l] = maphash.String(h.seeds[l], "fixed-width")
	}
	return h
}

// nullMark is what a null mixes into both lanes: a value hash would have to
// equal it in both lanes at once to be taken for a null.
const nullMark = 0x9e3779b97f4a7c15

// hashRows sets sums[i] to the fingerprint of row i of cols (len(sums) rows).
// Two rows hash alike when their columns hold equal values of equal Arrow
// types; callers cast columns to one type first.
func (h *rowHasher) hashRows(cols []arrow.Array, sums []contentHash) {
	for i := range sums {
		sums[i] = contentHash{}
	}
	for _, c := range cols {
		h.addColumn(c, sums)
	}
}

// mix folds one value hash into a lane: a multiply-add and the murmur3
// finalizer, so the column order matters and every bit of x reaches the lane.
func mix(lane, x uint64) uint64 {
	lane = lane*0xff51afd7ed558ccd + x
	lane ^= lane >> 33
	lane *= 0xc4ceb9fe1a85ec53
	lane ^= lane >> 33
	return lane
}

func (h *rowHasher) word(s *contentHash, v uint64) {
	s[0] = mix(s[0], mix(h.words[0], v))
	s[1] = mix(s[1], mix(h.words[1], v))
}

func (h *rowHasher) bytes(s *contentHash, b []byte) {
	s[0] = mix(s[0], maphash.Bytes(h.seeds[0], b))
	s[1] = mix(s[1], maphash.Bytes(h.seeds[1], b))
}

func (h *rowHasher) str(s *contentHash, v string) {
	s[0] = mix(s[0], maphash.String(h.seeds[0], v))
	s[1] = mix(s[1], maphash.String(h.seeds[1], v))
}

func null(s *contentHash) {
	s[0] = mix(s[0], nullMark)
	s[1] = mix(s[1], nullMark)
}

// valueArray is an Arrow array with typed values.
type valueArray[T any] interface {
	arrow.Array
	Value(int) T
}

func addWords[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64](h *rowHasher, a valueArray[T], sums []contentHash) {
	for i := range sums {
		if a.IsNull(i) {
			null(&sums[i])
			continue
		}
		h.word(&sums[i], uint64(a.Value(i)))
	}
}

func addBytes(h *rowHasher, a valueArray[[]byte], sums []contentHash) {
	for i := range sums {
		if a.IsNull(i) {
			null(&sums[i])
			continue
		}
		h.bytes(&sums[i], a.Value(i))
	}
}

func addStrings(h *rowHasher, a valueArray[string], sums []contentHash) {
	for i := range sums {
		if a.IsNull(i) {
			null(&sums[i])
			continue
		}
		h.str(&sums[i], a.Value(i))
	}
}

func (h *rowHasher) addColumn(arr arrow.Array, sums []contentHash) {
	switch a := arr.(type) {
	case *array.Int8:
		addWords(h, a, sums)
	case *array.Int16:
		addWords(h, a, sums)
	case *array.Int32:
		addWords(h, a, sums)
	case *array.Int64:
		addWords(h, a, sums)
	case *array.Uint8:
		addWords(h, a, sums)
	case *array.Uint16:
		addWords(h, a, sums)
	case *array.Uint32:
		addWords(h, a, sums)
	case *array.Uint64:
		addWords(h, a, sums)
	case *array.Date32:
		addWords(h, a, sums)
	case *array.Date64:
		addWords(h, a, sums)
	case *array.Time32:
		addWords(h, a, sums)
	case *array.Time64:
		addWords(h, a, sums)
	case *array.Timestamp:
		addWords(h, a, sums)
	case *array.Duration:
		addWords(h, a, sums)
	case *array.Boolean:
		for i := range sums {
			switch {
			case a.IsNull(i):
				null(&sums[i])
			case a.Value(i):
				h.word(&sums[i], 1)
			default:
				h.word(&sums[i], 0)
			}
		}
	case *array.Float32:
		for i := range sums {
			if a.IsNull(i) {
				null(&sums[i])
				continue
			}
			h.word(&sums[i], uint64(math.Float32bits(a.Value(i))))
		}
	case *array.Float64:
		for i := range sums {
			if a.IsNull(i) {
				null(&sums[i])
				continue
			}
			h.word(&sums[i], math.Float64bits(a.Value(i)))
		}
	case *array.Decimal128:
		for i := range sums {
			if a.IsNull(i) {
				null(&sums[i])
				continue
			}
			v := a.Value(i)
			h.word(&sums[i], uint64(v.HighBits()))
			h.word(&sums[i], v.LowBits())
		}
	case *array.String:
		addStrings(h, a, sums)
	case *array.LargeString:
		addStrings(h, a, sums)
	case *array.StringView:
		addStrings(h, a, sums)
	case *array.Binary:
		addBytes(h, a, sums)
	case *array.LargeBinary:
		addBytes(h, a, sums)
	case *array.BinaryView:
		addBytes(h, a, sums)
	case *array.FixedSizeBinary:
		addBytes(h, a, sums)
	case array.ExtensionArray:
		h.addColumn(a.Storage(), sums)
	default:
		// Nested and rarer types: their text form, as for any type before.
		for i := range sums {
			if arr.IsNull(i) {
				null(&sums[i])
				continue
			}
			h.str(&sums[i], arr.ValueStr(i))
		}
	}
}
