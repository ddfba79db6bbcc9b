package format

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// fuzzKeyTypes are the field types a fuzz input picks from, one byte each;
// the list type checks that a non-primitive type is refused, not decoded.
var fuzzKeyTypes = []iceberg.Type{
	iceberg.PrimitiveTypes.Bool,
	iceberg.PrimitiveTypes.Int32,
	iceberg.PrimitiveTypes.Int64,
	iceberg.PrimitiveTypes.Float32,
	iceberg.PrimitiveTypes.Float64,
	iceberg.DecimalTypeOf(38, 10),
	iceberg.PrimitiveTypes.Date,
	iceberg.PrimitiveTypes.Time,
	iceberg.PrimitiveTypes.Timestamp,
	iceberg.PrimitiveTypes.TimestampTzNs,
	iceberg.PrimitiveTypes.String,
	iceberg.PrimitiveTypes.UUID,
	iceberg.FixedTypeOf(3),
	iceberg.FixedTypeOf(0),
	iceberg.PrimitiveTypes.Binary,
	&iceberg.ListType{ElementID: 1, Element: iceberg.PrimitiveTypes.Int32},
}

func fuzzTypeIndex(t iceberg.Type) byte {
	for i, ft := range fuzzKeyTypes {
		if ft.Equals(t) {
			return byte(i)
		}
	}
	panic("type not in fuzzKeyTypes: " + t.String())
}

// FuzzDecodeKey feeds arbitrary bytes to DecodeKey under a type list taken
// from the input. Whatever decodes must re-encode to exactly the bytes it
// consumed (one encoding per key), must not alias the input, and every
// failure on primitive types must be ErrCorruptKey.
func FuzzDecodeKey(f *testing.F) {
	seeds := []struct {
		types []iceberg.Type
		key   Key
	}{
		{[]iceberg.Type{iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64}, Key{"a\x00b", int64(-2)}},
		{[]iceberg.Type{iceberg.PrimitiveTypes.Float64, iceberg.PrimitiveTypes.Float32}, Key{math.Copysign(0, -1), float32(math.NaN())}},
		{[]iceberg.Type{iceberg.PrimitiveTypes.Bool, iceberg.DecimalTypeOf(38, 10)}, Key{true, decimal128.FromI64(-1420)}},
		{[]iceberg.Type{iceberg.PrimitiveTypes.UUID, iceberg.FixedTypeOf(3), iceberg.PrimitiveTypes.Binary}, Key{uuid.Max, []byte{0, 0xff, 1}, []byte{0xff, 0}}},
		{[]iceberg.Type{iceberg.PrimitiveTypes.Date, iceberg.PrimitiveTypes.Binary}, Key{nil, nil}},
	}
	for _, s := range seeds {
		sel := make([]byte, len(s.types))
		for i, t := range s.types {
			sel[i] = fuzzTypeIndex(t)
		}
		enc, err := AppendKey(nil, s.types, s.key)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sel, enc)
		f.Add(sel, enc[:len(enc)-1])
	}
	f.Fuzz(func(t *testing.T, sel, data []byte) {
		if len(sel) > 8 {
			sel = sel[:8]
		}
		types := make([]iceberg.Type, len(sel))
		primitive := true
		for i, b := range sel {
			types[i] = fuzzKeyTypes[int(b)%len(fuzzKeyTypes)]
			primitive = primitive && IsPrimitive(types[i])
		}
		k, rest, err := DecodeKey(data, types)
		if err != nil {
			if primitive && !errors.Is(err, ErrCorruptKey) {
				t.Fatalf("DecodeKey(%x, %v) error %v does not wrap ErrCorruptKey", data, types, err)
			}
			return
		}
		if !primitive {
			t.Fatalf("DecodeKey(%x, %v) decoded a non-primitive type", data, types)
		}
		if len(rest) > len(data) || !bytes.Equal(rest, data[len(data)-len(rest):]) {
			t.Fatalf("DecodeKey(%x, %v) rest %x is not a suffix of the input", data, types, rest)
		}
		consumed := bytes.Clone(data[:len(data)-len(rest)])
		clear(data)
		enc, err := AppendKey(nil, types, k)
		if err != nil {
			t.Fatalf("re-encode %v decoded from %x: %v", k, consumed, err)
		}
		if !bytes.Equal(enc, consumed) {
			t.Fatalf("DecodeKey(%x, %v) = %v, which encodes as %x", consumed, types, k, enc)
		}
	})
}
