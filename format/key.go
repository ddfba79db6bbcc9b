package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// The key encoding turns a clustering key into bytes whose unsigned
// lexicographic order is the spec's cluster order, so that a byte-ordered
// store (staging in Pebble) keeps entries sorted without knowing the types.
// Every field is a tag byte and, when not null, a body; the layout is
// documented byte by byte in README.md ("Key encoding").
const (
	keyTagNull  = 0x00 // below keyTagValue: nulls sort first
	keyTagValue = 0x01

	// Variable-length bodies (string, binary) escape each 0x00 byte as
	// 0x00 0xFF and end with 0x00 0x01: the terminator sorts below every
	// continuation, so a shorter value sorts before its extensions and the
	// next field can follow directly.
	keyEscape     = 0x00
	keyEscapedNul = 0xFF
	keyTerminator = 0x01

	signBit32 = 1 << 31
	signBit64 = 1 << 63
)

// ErrCorruptKey marks bytes that are not a key encoding of the expected
// types. A caller that stored the bytes itself treats it as corruption of
// its store and halts rather than retrying.
var ErrCorruptKey = errors.New("corrupt key")

// AppendKey appends the order-preserving encoding of k to dst. Encodings of
// keys of the same types compare with bytes.Compare as CompareKeys compares
// the keys, and each field is self-delimiting, so the encodings of two
// tuples concatenated order as the combined tuple: staging appends the
// entry's identity to its clustering key this way. On error dst is returned
// with nothing appended.
func AppendKey(dst []byte, types []iceberg.Type, k Key) ([]byte, error) {
	if len(k) != len(types) {
		return dst, fmt.Errorf("encode key: %d values for %d fields", len(k), len(types))
	}
	start := len(dst)
	for i, t := range types {
		var err error
		if dst, err = appendValueKey(dst, t, k[i]); err != nil {
			return dst[:start], fmt.Errorf("encode key field %d (%s): %w", i, t, err)
		}
	}
	return dst, nil
}

// AppendValueKey appends the encoding of one value of type t (nil is null)
// to dst, for callers that build a key field by field, such as a seek bound
// on a leading prefix of the cluster fields. On error dst is returned with
// nothing appended.
func AppendValueKey(dst []byte, t iceberg.Type, v any) ([]byte, error) {
	dst, err := appendValueKey(dst, t, v)
	if err != nil {
		return dst, fmt.Errorf("encode %s key value: %w", t, err)
	}
	return dst, nil
}

func appendValueKey(dst []byte, t iceberg.Type, v any) ([]byte, error) {
	if !IsPrimitive(t) {
		return dst, fmt.Errorf("type %s is not a primitive type that an index can order", t)
	}
	if err := CheckValue(t, v); err != nil {
		return dst, err
	}
	if v == nil {
		return append(dst, keyTagNull), nil
	}
	dst = append(dst, keyTagValue)
	switch v := v.(type) {
	case bool:
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case int32:
		return binary.BigEndian.AppendUint32(dst, uint32(v)^signBit32), nil
	case int64:
		return binary.BigEndian.AppendUint64(dst, uint64(v)^signBit64), nil
	case float32:
		// The same transform as Compare, so NaN payloads order alike.
		return binary.BigEndian.AppendUint32(dst, uint32(float32TotalOrder(v))^signBit32), nil
	case float64:
		return binary.BigEndian.AppendUint64(dst, uint64(float64TotalOrder(v))^signBit64), nil
	case decimal128.Num:
		// The scale is fixed by the type, so the unscaled values order as
		// the decimals do.
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.HighBits())^signBit64)
		return binary.BigEndian.AppendUint64(dst, v.LowBits()), nil
	case string:
		return appendEscaped(dst, v), nil
	case uuid.UUID:
		return append(dst, v[:]...), nil
	case []byte:
		if _, fixed := t.(iceberg.FixedType); fixed {
			return append(dst, v...), nil // CheckValue has checked the length
		}
		return appendEscaped(dst, v), nil
	}
	// CheckValue accepted a representation this switch does not know.
	panic(fmt.Sprintf("format: key encoding of %T for %s missing", v, t))
}

func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	for {
		i := indexNul(s)
		if i < 0 {
			return append(append(dst, s...), keyEscape, keyTerminator)
		}
		dst = append(append(dst, s[:i]...), keyEscape, keyEscapedNul)
		s = s[i+1:]
	}
}

// indexNul is the index of the first NUL byte of s, or -1: the standard
// library's vectorised search, about twice as fast as a loop over a data
// file path (BenchmarkAppendKeyPath).
func indexNul[S string | []byte](s S) int {
	if b, ok := any(s).([]byte); ok {
		return bytes.IndexByte(b, 0)
	}
	return strings.IndexByte(string(s), 0)
}

// DecodeKey decodes one key of the given types from the front of data and
// returns the bytes after it, where staging finds the entry's identity.
// Decoded byte slices do not alias data. It accepts only the bytes that
// AppendKey produces, so equal keys have equal encodings; anything else is
// an error that wraps ErrCorruptKey and names the field and byte offset.
func DecodeKey(data []byte, types []iceberg.Type) (k Key, rest []byte, err error) {
	k = make(Key, len(types))
	rest = data
	for i, t := range types {
		if !IsPrimitive(t) {
			return nil, nil, fmt.Errorf("decode key field %d: type %s is not a primitive type that an index can order", i, t)
		}
		v, n, err := decodeValueKey(rest, t)
		if err != nil {
			return nil, nil, fmt.Errorf("decode key field %d (%s) at byte %d: %w", i, t, len(data)-len(rest), err)
		}
		k[i] = v
		rest = rest[n:]
	}
	return k, rest, nil
}

// decodeValueKey decodes the field at the front of b and returns its value
// and encoded length.
func decodeValueKey(b []byte, t iceberg.Type) (any, int, error) {
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("%w: truncated: no tag byte", ErrCorruptKey)
	}
	switch b[0] {
	case keyTagNull:
		return nil, 1, nil
	case keyTagValue:
	default:
		return nil, 0, fmt.Errorf("%w: tag 0x%02x is neither 0x%02x (null) nor 0x%02x (value)",
			ErrCorruptKey, b[0], keyTagNull, keyTagValue)
	}
	body := b[1:]
	need := func(n int) error {
		if len(body) < n {
			return fmt.Errorf("%w: truncated: value needs %d bytes, %d left", ErrCorruptKey, n, len(body))
		}
		return nil
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		if err := need(1); err != nil {
			return nil, 0, err
		}
		if body[0] > 1 {
			return nil, 0, fmt.Errorf("%w: boolean byte 0x%02x is neither 0x00 nor 0x01", ErrCorruptKey, body[0])
		}
		return body[0] == 1, 2, nil
	case iceberg.Int32Type, iceberg.DateType:
		if err := need(4); err != nil {
			return nil, 0, err
		}
		return int32(binary.BigEndian.Uint32(body) ^ signBit32), 5, nil
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		if err := need(8); err != nil {
			return nil, 0, err
		}
		return int64(binary.BigEndian.Uint64(body) ^ signBit64), 9, nil
	case iceberg.Float32Type:
		if err := need(4); err != nil {
			return nil, 0, err
		}
		// Inverse of the total-order transform: a set top bit was a
		// positive value with its sign bit set, a clear one a negative
		// value with every bit flipped.
		u := binary.BigEndian.Uint32(body)
		if u&signBit32 != 0 {
			u &^= signBit32
		} else {
			u = ^u
		}
		return math.Float32frombits(u), 5, nil
	case iceberg.Float64Type:
		if err := need(8); err != nil {
			return nil, 0, err
		}
		u := binary.BigEndian.Uint64(body)
		if u&signBit64 != 0 {
			u &^= signBit64
		} else {
			u = ^u
		}
		return math.Float64frombits(u), 9, nil
	case iceberg.DecimalType:
		if err := need(16); err != nil {
			return nil, 0, err
		}
		hi := int64(binary.BigEndian.Uint64(body) ^ signBit64)
		return decimal128.New(hi, binary.BigEndian.Uint64(body[8:])), 17, nil
	case iceberg.UUIDType:
		if err := need(16); err != nil {
			return nil, 0, err
		}
		return uuid.UUID(body[:16]), 17, nil
	case iceberg.FixedType:
		if err := need(t.Len()); err != nil {
			return nil, 0, err
		}
		return bytes.Clone(body[:t.Len()]), 1 + t.Len(), nil
	case iceberg.StringType:
		s, n, err := unescape(body)
		if err != nil {
			return nil, 0, err
		}
		return string(s), 1 + n, nil
	case iceberg.BinaryType:
		s, n, err := unescape(body)
		if err != nil {
			return nil, 0, err
		}
		return bytes.Clone(s), 1 + n, nil
	}
	// IsPrimitive accepted a type this switch does not know.
	panic(fmt.Sprintf("format: key decoding of %s missing", t))
}

// unescape decodes an escaped variable-length body at the front of b and
// returns the value, which may alias b, and the body's encoded length.
func unescape(b []byte) ([]byte, int, error) {
	i := bytes.IndexByte(b, keyEscape)
	if i >= 0 && i+1 < len(b) && b[i+1] == keyTerminator {
		return b[:i], i + 2, nil // no 0x00 inside: the common case
	}
	var out []byte
	for pos := 0; ; {
		i := bytes.IndexByte(b[pos:], keyEscape)
		if i < 0 {
			return nil, 0, fmt.Errorf("%w: truncated: no terminator 0x00 0x01 after %d bytes", ErrCorruptKey, len(b))
		}
		out = append(out, b[pos:pos+i]...)
		pos += i
		if pos+1 == len(b) {
			return nil, 0, fmt.Errorf("%w: truncated: escape byte 0x00 at the end of the data", ErrCorruptKey)
		}
		switch b[pos+1] {
		case keyEscapedNul:
			out = append(out, 0)
		case keyTerminator:
			return out, pos + 2, nil
		default:
			return nil, 0, fmt.Errorf("%w: escape 0x00 0x%02x at value byte %d is neither 0x00 0xff nor the terminator 0x00 0x01",
				ErrCorruptKey, b[pos+1], pos)
		}
		pos += 2
	}
}
