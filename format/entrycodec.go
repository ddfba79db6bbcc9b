package format

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
)

// EntryCodec is the encoding of index entries as byte records, which the
// staging store keeps, the full build sorts and the merge reads (README.md,
// "Entry records"). A record's key is the order-preserving encoding
// (AppendKey in key.go) of the clustering key, then the identity values,
// then the row location when the index stores one, so the byte order of
// keys is the spec's cluster order and entries of one clustering key sort by
// identity. Its value is the encoding of every entry field in EntrySchema
// order, so that an entry is its whole value even when the key does not
// identify it.
type EntryCodec struct {
	types    []iceberg.Type // every entry field, EntrySchema order
	keyPos   []int          // positions of the key's fields: cluster, identity, location
	keyTypes []iceberg.Type
	nCluster int
}

// NewEntryCodec returns the codec of an index's entries.
func NewEntryCodec(s *IndexSchema) *EntryCodec {
	c := &EntryCodec{}
	pos := map[int]int{}
	for i, f := range s.Fields() {
		pos[f.ID] = i
		c.types = append(c.types, f.Type)
	}
	add := func(id int) {
		c.keyPos = append(c.keyPos, pos[id])
		c.keyTypes = append(c.keyTypes, c.types[pos[id]])
	}
	for _, f := range s.ClusterFields() {
		add(f.ID)
	}
	c.nCluster = len(c.keyPos)
	for _, f := range s.Fields() {
		if f.Kind == KindIdentity {
			add(f.ID)
		}
	}
	for _, f := range s.Fields() {
		if r, ok := f.Expr.(Ref); ok && f.Kind == KindMaterialized && IsLocationField(r.ID) {
			add(f.ID)
		}
	}
	return c
}

// Row reads row i of an entry batch (ArrowSchema(EntrySchema)) as values.
func (c *EntryCodec) Row(dst Key, rec arrow.RecordBatch, i int) Key {
	dst = dst[:0]
	for col, t := range c.types {
		dst = append(dst, ValueAtAs(t, rec.Column(col), i))
	}
	return dst
}

// AppendKey appends the staging key of an entry.
func (c *EntryCodec) AppendKey(dst []byte, entry Key) ([]byte, error) {
	var err error
	for i, p := range c.keyPos {
		if dst, err = AppendValueKey(dst, c.keyTypes[i], entry[p]); err != nil {
			return nil, fmt.Errorf("encode entry key: %w", err)
		}
	}
	return dst, nil
}

// AppendValue appends the encoding of all of an entry's values.
func (c *EntryCodec) AppendValue(dst []byte, entry Key) ([]byte, error) {
	out, err := AppendKey(dst, c.types, entry)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	return out, nil
}

// DecodeValue reads an entry encoded by AppendValue.
func (c *EntryCodec) DecodeValue(data []byte) (Key, error) {
	k, rest, err := DecodeKey(data, c.types)
	if err != nil {
		return nil, fmt.Errorf("decode staged entry: %w", err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode staged entry: %d trailing bytes", len(rest))
	}
	return k, nil
}

// ClusterKey returns the clustering key of an entry (a view, not a copy).
func (c *EntryCodec) ClusterKey(dst Key, entry Key) Key {
	dst = dst[:0]
	for _, p := range c.keyPos[:c.nCluster] {
		dst = append(dst, entry[p])
	}
	return dst
}

// Types are the entry fields' types in EntrySchema order.
func (c *EntryCodec) Types() []iceberg.Type { return c.types }

// AppendRow appends the staging key and the value encoding of row i of an
// entry batch (ArrowSchema(EntrySchema)) to key and val: what AppendKey and
// AppendValue append for Row(rec, i), without a Go value per field. The
// fields at positions fixedPos take the encoding fixedEnc (AppendValueKey's
// bytes) instead of their column's value, as the full build's sort records
// take a data file's rank for its path.
func (c *EntryCodec) AppendRow(key, val []byte, rec arrow.RecordBatch, i int, fixedPos []int, fixedEnc []byte) ([]byte, []byte, error) {
	var err error
	for f, t := range c.types {
		if slices.Contains(fixedPos, f) {
			val = append(val, fixedEnc...)
		} else if val, err = appendColumnKey(val, t, rec.Column(f), i); err != nil {
			return nil, nil, fmt.Errorf("encode entry: %w", err)
		}
	}
	for k, p := range c.keyPos {
		if slices.Contains(fixedPos, p) {
			key = append(key, fixedEnc...)
		} else if key, err = appendColumnKey(key, c.keyTypes[k], rec.Column(p), i); err != nil {
			return nil, nil, fmt.Errorf("encode entry key: %w", err)
		}
	}
	return key, val, nil
}

// AppendRowKey appends the staging key of row i of an entry batch: what
// AppendKey appends for Row(rec, i).
func (c *EntryCodec) AppendRowKey(key []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	var err error
	for k, p := range c.keyPos {
		if key, err = appendColumnKey(key, c.keyTypes[k], rec.Column(p), i); err != nil {
			return nil, fmt.Errorf("encode entry key: %w", err)
		}
	}
	return key, nil
}

// AppendColumnsKey appends the key encoding (AppendKey) of row i of the
// first len(types) columns of rec, of the Arrow types ArrowType gives for
// types, without a Go value per field where the type allows.
func AppendColumnsKey(dst []byte, types []iceberg.Type, rec arrow.RecordBatch, i int) ([]byte, error) {
	var err error
	for c, t := range types {
		if dst, err = appendColumnKey(dst, t, rec.Column(c), i); err != nil {
			return nil, fmt.Errorf("encode key field %d (%s): %w", c, t, err)
		}
	}
	return dst, nil
}

// AppendRowValue appends the value encoding of row i of an entry batch:
// what AppendValue appends for Row(rec, i).
func (c *EntryCodec) AppendRowValue(val []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	var err error
	for f, t := range c.types {
		if val, err = appendColumnKey(val, t, rec.Column(f), i); err != nil {
			return nil, fmt.Errorf("encode entry: %w", err)
		}
	}
	return val, nil
}

// appendColumnKey appends the key encoding of row i of col, a value of type
// t: longs, ints and strings straight from their arrays, other types
// through their Go values (AppendValueKey of ValueAtAs).
func appendColumnKey(dst []byte, t iceberg.Type, col arrow.Array, i int) ([]byte, error) {
	switch t.(type) {
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		var v int64
		switch a := col.(type) {
		case *array.Int64:
			v = a.Value(i)
		case *array.Timestamp:
			v = int64(a.Value(i))
		case *array.Time64:
			v = int64(a.Value(i))
		default:
			return AppendValueKey(dst, t, ValueAtAs(t, col, i))
		}
		if col.IsNull(i) {
			return append(dst, keyTagNull), nil
		}
		return binary.BigEndian.AppendUint64(append(dst, keyTagValue), uint64(v)^signBit64), nil
	case iceberg.Int32Type, iceberg.DateType:
		var v int32
		switch a := col.(type) {
		case *array.Int32:
			v = a.Value(i)
		case *array.Date32:
			v = int32(a.Value(i))
		default:
			return AppendValueKey(dst, t, ValueAtAs(t, col, i))
		}
		if col.IsNull(i) {
			return append(dst, keyTagNull), nil
		}
		return binary.BigEndian.AppendUint32(append(dst, keyTagValue), uint32(v)^signBit32), nil
	case iceberg.StringType:
		a, ok := col.(*array.String)
		if !ok {
			return AppendValueKey(dst, t, ValueAtAs(t, col, i))
		}
		if col.IsNull(i) {
			return append(dst, keyTagNull), nil
		}
		return appendEscaped(append(dst, keyTagValue), a.Value(i)), nil
	}
	return AppendValueKey(dst, t, ValueAtAs(t, col, i))
}

// DecodeValueInto reads an entry encoded by AppendValue, as DecodeValue
// does, and appends field i to bs[i] as AppendValue(bs[i], v) would: longs,
// ints and strings without a Go value each. A field whose builder is nil
// goes to raw instead, as the bytes of its value (a string's or binary
// value's, which may alias data; nil for null), for fields the caller
// resolves itself. What was appended before an error stays appended.
func (c *EntryCodec) DecodeValueInto(data []byte, bs []array.Builder, raw func(field int, v []byte) error) error {
	rest := data
	for f, t := range c.types {
		n, err := decodeInto(rest, t, bs[f], f, raw)
		if err != nil {
			return fmt.Errorf("decode staged entry: decode key field %d (%s) at byte %d: %w", f, t, len(data)-len(rest), err)
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("decode staged entry: %d trailing bytes", len(rest))
	}
	return nil
}

// decodeInto decodes the field at the front of b, of type t, into bld (or
// raw, when bld is nil) and returns its encoded length.
func decodeInto(b []byte, t iceberg.Type, bld array.Builder, field int, raw func(int, []byte) error) (int, error) {
	if len(b) > 0 && b[0] == keyTagValue {
		switch t.(type) {
		case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
			iceberg.TimestampNsType, iceberg.TimestampTzNsType:
			if len(b) >= 9 {
				v := int64(binary.BigEndian.Uint64(b[1:]) ^ signBit64)
				switch bb := bld.(type) {
				case *array.Int64Builder:
					bb.Append(v)
					return 9, nil
				case *array.TimestampBuilder:
					bb.Append(arrow.Timestamp(v))
					return 9, nil
				case *array.Time64Builder:
					bb.Append(arrow.Time64(v))
					return 9, nil
				}
			}
		case iceberg.Int32Type, iceberg.DateType:
			if len(b) >= 5 {
				v := int32(binary.BigEndian.Uint32(b[1:]) ^ signBit32)
				switch bb := bld.(type) {
				case *array.Int32Builder:
					bb.Append(v)
					return 5, nil
				case *array.Date32Builder:
					bb.Append(arrow.Date32(v))
					return 5, nil
				}
			}
		case iceberg.StringType:
			s, n, err := unescape(b[1:])
			if err != nil {
				return 0, err
			}
			switch bb := bld.(type) {
			case nil:
				return 1 + n, raw(field, s)
			case *array.StringBuilder:
				bb.BinaryBuilder.Append(s)
				return 1 + n, nil
			}
		}
	}
	v, n, err := decodeValueKey(b, t)
	if err != nil {
		return 0, err
	}
	if bld == nil {
		var bs []byte
		switch v := v.(type) {
		case string:
			bs = []byte(v)
		case []byte:
			bs = v
		}
		return n, raw(field, bs)
	}
	return n, AppendValue(bld, v)
}
