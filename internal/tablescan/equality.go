package tablescan

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
)

// EqualityDeletes is the content of one equality delete file: the set of
// deleted tuples of its equality fields. A data row is deleted when its values
// of FieldIDs equal a tuple of the set, field by field, where null equals null
// (the spec's rule for equality deletes), NaN equals NaN and -0.0 differs from
// 0.0 (Java's comparator for floats, which the reference readers use).
type EqualityDeletes struct {
	// FieldIDs are the equality field IDs, sorted ascending; tuples hold their
	// values in this order.
	FieldIDs []int
	// The tuples, by their key bytes (appendRowKey): those of one integer
	// (a tag and 8 big-endian bytes, the usual equality key of an upsert
	// table) as that integer in ints, a compressed bitmap: the keys of an
	// upsert table crowd together (ids handed out in order), so its
	// containers are few and dense and small (a 10M-row CDC build spent
	// 3.95 CPU seconds in hash-map lookups, 0.19 in these); all other
	// tuples in keys. A set merged from many (mergeSets) holds its
	// integers in dense instead, one bit each over their range, when they
	// are close enough together (see mergeInts). Exactly one of ints and
	// dense is set.
	ints  *roaring64.Bitmap
	dense *denseInts
	keys  map[string]struct{}
}

// intKey returns the integer of a key of one non-null integer.
func intKey(key []byte) (uint64, bool) {
	if len(key) != 9 || key[0] != 1 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:]), true
}

// add puts the tuple of key bytes key into the set.
func (e *EqualityDeletes) add(key []byte) {
	if v, ok := intKey(key); ok {
		e.roaringInts().Add(v)
	} else {
		e.keys[string(key)] = struct{}{}
	}
}

// mergeSets returns one set holding every tuple of sets, which share their
// field IDs (see mergeInts for the integer keys).
func mergeSets(sets []*EqualityDeletes) *EqualityDeletes {
	n := 0
	for _, set := range sets {
		n += len(set.keys)
	}
	out := &EqualityDeletes{FieldIDs: sets[0].FieldIDs, keys: make(map[string]struct{}, n)}
	out.ints, out.dense = mergeInts(sets)
	for _, set := range sets {
		for k := range set.keys {
			out.keys[k] = struct{}{}
		}
	}
	return out
}

// mergeWorth reports whether merging sets into one pays for a data file of
// rows rows: testing each row against every set costs a lookup per row and
// set; the merge costs an insert per tuple held as bytes, and a union per
// container of the integer ones, counted as a sixteenth of a lookup per
// integer.
func mergeWorth(sets []*EqualityDeletes, rows int64) bool {
	if len(sets) < 2 {
		return false
	}
	var cost int64
	for _, set := range sets {
		cost += int64(set.intsLen())/16 + int64(len(set.keys))
	}
	return rows*int64(len(sets)) > cost
}

// NewEqualityDeletes returns an empty set over the equality fields ids. The
// order of ids does not matter: delete files that list the same fields in a
// different order describe the same tuples.
func NewEqualityDeletes(ids []int) *EqualityDeletes {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	return &EqualityDeletes{FieldIDs: sorted, ints: roaring64.New(), keys: map[string]struct{}{}}
}

// Add puts a tuple into the set: the canonical Go values (see format.Key)
// of FieldIDs, in FieldIDs order.
func (e *EqualityDeletes) Add(tuple format.Key) error {
	key, err := appendTuple(nil, tuple)
	if err != nil {
		return err
	}
	e.add(key)
	return nil
}

// Contains reports whether a tuple (values of FieldIDs, in FieldIDs order) is
// in the set.
func (e *EqualityDeletes) Contains(tuple format.Key) (bool, error) {
	if len(tuple) == 1 {
		if v, ok := tuple[0].(int64); ok { // the key of a one-long tuple, without encoding it
			return e.containsInt(uint64(v)), nil
		}
	}
	var buf [64]byte // most tuples fit: no allocation per call
	key, err := appendTuple(buf[:0], tuple)
	if err != nil {
		return false, err
	}
	return e.containsKey(key), nil
}

// Len is the number of distinct deleted tuples.
func (e *EqualityDeletes) Len() int { return int(e.intsLen()) + len(e.keys) }

// Bytes estimates the memory the set holds.
func (e *EqualityDeletes) Bytes() int64 {
	var n int64
	if e.dense != nil {
		n = int64(8 * len(e.dense.words))
	} else {
		n = int64(e.ints.GetSizeInBytes())
	}
	for k := range e.keys {
		n += int64(len(k)) + 48 // the string header and the map's share
	}
	return n
}

func (e *EqualityDeletes) containsKey(key []byte) bool {
	if v, ok := intKey(key); ok {
		return e.containsInt(v)
	}
	_, ok := e.keys[string(key)]
	return ok
}

// addRows adds the tuples of rows of cols (the equality columns in FieldIDs
// order).
func (e *EqualityDeletes) addRows(cols []arrow.Array, rows int) error {
	var key []byte
	for i := range rows {
		var err error
		if key, err = appendRowKey(key[:0], cols, i); err != nil {
			return err
		}
		e.add(key)
	}
	return nil
}

// appendRowKey appends the key of row i of cols to dst.
func appendRowKey(dst []byte, cols []arrow.Array, i int) ([]byte, error) {
	for _, c := range cols {
		var err error
		if dst, err = appendColumnKey(dst, c, i); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// appendColumnKey appends the key bytes of row i of arr, as appendValueKey
// does for its value; the usual equality columns (integers and strings)
// are read without boxing the value, which a scan would do for every row.
func appendColumnKey(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, 0), nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return binary.BigEndian.AppendUint64(append(dst, 1), uint64(a.Value(i))), nil
	case *array.Int32:
		return binary.BigEndian.AppendUint32(append(dst, 1), uint32(a.Value(i))), nil
	case *array.String:
		v := a.Value(i)
		dst = binary.AppendUvarint(append(dst, 1), uint64(len(v)))
		return append(dst, v...), nil
	}
	return appendValueKey(dst, format.ValueAt(arr, i))
}

func appendTuple(dst []byte, tuple format.Key) ([]byte, error) {
	for _, v := range tuple {
		var err error
		if dst, err = appendValueKey(dst, v); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// Key bytes of one value: a tag byte, 0 for null and 1 otherwise, then the
// value. The types of a tuple's positions are fixed by its fields, so only
// variable-length values need a length prefix to keep keys unambiguous.
func appendValueKey(dst []byte, v any) ([]byte, error) {
	if v == nil {
		return append(dst, 0), nil
	}
	dst = append(dst, 1)
	switch v := v.(type) {
	case bool:
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case int32:
		return binary.BigEndian.AppendUint32(dst, uint32(v)), nil
	case int64:
		return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
	case float32:
		if v != v {
			return binary.BigEndian.AppendUint32(dst, 0x7fc00000), nil
		}
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(v)), nil
	case float64:
		if v != v {
			return binary.BigEndian.AppendUint64(dst, 0x7ff8000000000000), nil
		}
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v)), nil
	case decimal128.Num:
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.HighBits()))
		return binary.BigEndian.AppendUint64(dst, v.LowBits()), nil
	case string:
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		return append(dst, v...), nil
	case []byte:
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		return append(dst, v...), nil
	case uuid.UUID:
		return append(dst, v[:]...), nil
	}
	return nil, fmt.Errorf("equality delete value %v of type %T: unsupported", v, v)
}
