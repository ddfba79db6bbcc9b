package format

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

var (
	negZero32   = float32(math.Copysign(0, -1))
	negZero64   = math.Copysign(0, -1)
	keyDecimal  = iceberg.DecimalTypeOf(38, 10)
	keyDecimal9 = iceberg.DecimalTypeOf(9, 2)
	keyFixed3   = iceberg.FixedTypeOf(3)
)

// keyOrderCases lists, per type, values in strictly ascending cluster order.
// The random tests below also draw their edge values from here.
var keyOrderCases = []struct {
	name   string
	t      iceberg.Type
	values []any
}{
	{"boolean", iceberg.PrimitiveTypes.Bool, []any{nil, false, true}},
	{"int", iceberg.PrimitiveTypes.Int32, []any{nil, int32(math.MinInt32), int32(-256), int32(-1), int32(0), int32(1), int32(255), int32(math.MaxInt32)}},
	{"long", iceberg.PrimitiveTypes.Int64, []any{nil, int64(math.MinInt64), int64(math.MinInt32) - 1, int64(-1), int64(0), int64(1), int64(math.MaxInt32) + 1, int64(math.MaxInt64)}},
	{"float", iceberg.PrimitiveTypes.Float32, []any{
		nil,
		math.Float32frombits(0xffffffff), // -NaN, largest payload
		math.Float32frombits(0xffc00000), // -NaN, quiet
		float32(math.Inf(-1)),
		-float32(math.MaxFloat32),
		float32(-1),
		-float32(math.SmallestNonzeroFloat32),
		negZero32,
		float32(0),
		float32(math.SmallestNonzeroFloat32),
		float32(1),
		float32(math.MaxFloat32),
		float32(math.Inf(1)),
		math.Float32frombits(0x7f800001), // NaN, signalling, smallest payload
		math.Float32frombits(0x7fc00000), // NaN, quiet
		math.Float32frombits(0x7fffffff), // NaN, largest payload
	}},
	{"double", iceberg.PrimitiveTypes.Float64, []any{
		nil,
		math.Float64frombits(0xffffffffffffffff),
		math.Float64frombits(0xfff8000000000000),
		math.Inf(-1),
		-math.MaxFloat64,
		-1.0,
		-math.SmallestNonzeroFloat64,
		negZero64,
		0.0,
		math.SmallestNonzeroFloat64,
		1.0,
		math.MaxFloat64,
		math.Inf(1),
		math.Float64frombits(0x7ff0000000000001),
		math.NaN(),
		math.Float64frombits(0x7fffffffffffffff),
	}},
	{"decimal(38,10)", keyDecimal, []any{
		nil,
		decimal128.New(math.MinInt64, 0), // -2^127
		decimal128.New(-2, math.MaxUint64),
		decimal128.New(-1, 0), // -2^64
		decimal128.New(-1, 1<<63),
		decimal128.FromI64(-1),
		decimal128.FromI64(0),
		decimal128.FromI64(1),
		decimal128.FromU64(math.MaxUint64),
		decimal128.New(1, 0), // 2^64
		decimal128.New(math.MaxInt64, math.MaxUint64),
	}},
	{"decimal(9,2)", keyDecimal9, []any{nil, decimal128.FromI64(-999999999), decimal128.FromI64(-1420), decimal128.FromI64(-1), decimal128.FromI64(0), decimal128.FromI64(1420), decimal128.FromI64(999999999)}},
	{"date", iceberg.PrimitiveTypes.Date, []any{nil, int32(math.MinInt32), int32(-719162), int32(-1), int32(0), int32(17486), int32(math.MaxInt32)}},
	{"time", iceberg.PrimitiveTypes.Time, []any{nil, int64(0), int64(1), int64(81068000000), int64(86399999999)}},
	{"timestamp", iceberg.PrimitiveTypes.Timestamp, []any{nil, int64(math.MinInt64), int64(-62135596800000000), int64(-1000000), int64(-1), int64(0), int64(1), int64(1510871468000000), int64(math.MaxInt64)}},
	{"timestamptz", iceberg.PrimitiveTypes.TimestampTz, []any{nil, int64(math.MinInt64), int64(-1), int64(0), int64(1), int64(math.MaxInt64)}},
	{"timestamp_ns", iceberg.PrimitiveTypes.TimestampNs, []any{nil, int64(math.MinInt64), int64(-1), int64(0), int64(1), int64(math.MaxInt64)}},
	{"timestamptz_ns", iceberg.PrimitiveTypes.TimestampTzNs, []any{nil, int64(math.MinInt64), int64(-1), int64(0), int64(1), int64(math.MaxInt64)}},
	{"string", iceberg.PrimitiveTypes.String, []any{
		nil, "", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "abc", "b", "é", "\xff", "\xff\x00", "\xff\xff",
	}},
	{"binary", iceberg.PrimitiveTypes.Binary, []any{
		nil, []byte{}, []byte{0}, []byte{0, 0}, []byte{0, 0, 0xff}, []byte{0, 1}, []byte{0, 0xff}, []byte{1}, []byte{0xfe, 0xff}, []byte{0xff}, []byte{0xff, 0}, []byte{0xff, 0xff},
	}},
	{"uuid", iceberg.PrimitiveTypes.UUID, []any{
		nil,
		uuid.UUID{},
		uuid.MustParse("00000000-0000-0000-0000-000000000001"),
		uuid.MustParse("00000000-0000-0000-0000-0000000000ff"),
		uuid.MustParse("7fffffff-ffff-ffff-ffff-ffffffffffff"),
		uuid.MustParse("80000000-0000-0000-0000-000000000000"),
		uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
		uuid.Max,
	}},
	{"fixed[3]", keyFixed3, []any{nil, []byte{0, 0, 0}, []byte{0, 0, 1}, []byte{0, 0, 0xff}, []byte{0, 1, 0}, []byte{1, 0, 0}, []byte{0xff, 0xff, 0xff}}},
}

func mustAppendKey(t testing.TB, types []iceberg.Type, k Key) []byte {
	t.Helper()
	b, err := AppendKey(nil, types, k)
	if err != nil {
		t.Fatalf("AppendKey(%v): %v", k, err)
	}
	return b
}

func TestKeyEncodingOrdersEdgeValues(t *testing.T) {
	for _, tc := range keyOrderCases {
		t.Run(tc.name, func(t *testing.T) {
			types := []iceberg.Type{tc.t}
			enc := make([][]byte, len(tc.values))
			for i, v := range tc.values {
				enc[i] = mustAppendKey(t, types, Key{v})
			}
			for i := range tc.values {
				for j := i + 1; j < len(tc.values); j++ {
					a, b := tc.values[i], tc.values[j]
					if c := Compare(tc.t, a, b); c >= 0 {
						t.Fatalf("table out of order: Compare(%s, %s) = %d", FormatValue(tc.t, a), FormatValue(tc.t, b), c)
					}
					if bytes.Compare(enc[i], enc[j]) >= 0 {
						t.Errorf("encoding of %s (%x) does not sort before %s (%x)",
							FormatValue(tc.t, a), enc[i], FormatValue(tc.t, b), enc[j])
					}
				}
			}
		})
	}
}

func TestKeyEncodingConcatenationOrdersCombinedTuple(t *testing.T) {
	str, long := iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64
	bin := iceberg.PrimitiveTypes.Binary
	tests := []struct {
		name       string
		key, ident []iceberg.Type
		lo, hi     [2]Key // {key, identity}
	}{
		{"prefix string first", []iceberg.Type{str}, []iceberg.Type{long},
			[2]Key{{"a"}, {int64(2)}}, [2]Key{{"ab"}, {int64(1)}}},
		{"string before embedded nul", []iceberg.Type{str}, []iceberg.Type{long},
			[2]Key{{"a"}, {int64(math.MaxInt64)}}, [2]Key{{"a\x00"}, {int64(math.MinInt64)}}},
		{"equal key, identity decides", []iceberg.Type{str}, []iceberg.Type{long},
			[2]Key{{"a"}, {int64(1)}}, [2]Key{{"a"}, {int64(2)}}},
		{"null key first", []iceberg.Type{long}, []iceberg.Type{str},
			[2]Key{{nil}, {"\xff"}}, [2]Key{{int64(math.MinInt64)}, {""}}},
		{"binary then binary", []iceberg.Type{bin}, []iceberg.Type{bin},
			[2]Key{{[]byte{0}}, {[]byte{0xff}}}, [2]Key{{[]byte{0, 0}}, {[]byte{}}}},
		{"empty binary then null", []iceberg.Type{bin}, []iceberg.Type{bin},
			[2]Key{{[]byte{}}, {[]byte{0xff, 0xff}}}, [2]Key{{[]byte{1}}, {nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo := append(mustAppendKey(t, tc.key, tc.lo[0]), mustAppendKey(t, tc.ident, tc.lo[1])...)
			hi := append(mustAppendKey(t, tc.key, tc.hi[0]), mustAppendKey(t, tc.ident, tc.hi[1])...)
			if bytes.Compare(lo, hi) >= 0 {
				t.Errorf("%x does not sort before %x", lo, hi)
			}
		})
	}
}

// TestKeyEncodingGolden pins the byte layout that README.md documents; the
// expected bytes are worked out by hand from that layout.
func TestKeyEncodingGolden(t *testing.T) {
	tests := []struct {
		name  string
		types []iceberg.Type
		key   Key
		hex   string
	}{
		{"null long", []iceberg.Type{iceberg.PrimitiveTypes.Int64}, Key{nil}, "00"},
		{"false", []iceberg.Type{iceberg.PrimitiveTypes.Bool}, Key{false}, "0100"},
		{"true", []iceberg.Type{iceberg.PrimitiveTypes.Bool}, Key{true}, "0101"},
		{"int 0", []iceberg.Type{iceberg.PrimitiveTypes.Int32}, Key{int32(0)}, "0180000000"},
		{"long 1", []iceberg.Type{iceberg.PrimitiveTypes.Int64}, Key{int64(1)}, "018000000000000001"},
		{"long -1", []iceberg.Type{iceberg.PrimitiveTypes.Int64}, Key{int64(-1)}, "017fffffffffffffff"},
		{"date 2017-11-16", []iceberg.Type{iceberg.PrimitiveTypes.Date}, Key{int32(17486)}, "018000444e"},
		{"timestamp 1969-12-31T23:59:59.999999", []iceberg.Type{iceberg.PrimitiveTypes.Timestamp}, Key{int64(-1)}, "017fffffffffffffff"},
		{"float 1", []iceberg.Type{iceberg.PrimitiveTypes.Float32}, Key{float32(1)}, "01bf800000"},
		{"float quiet NaN", []iceberg.Type{iceberg.PrimitiveTypes.Float32}, Key{math.Float32frombits(0x7fc00000)}, "01ffc00000"},
		{"double 1", []iceberg.Type{iceberg.PrimitiveTypes.Float64}, Key{1.0}, "01bff0000000000000"},
		{"double -1", []iceberg.Type{iceberg.PrimitiveTypes.Float64}, Key{-1.0}, "01400fffffffffffff"},
		{"double 0", []iceberg.Type{iceberg.PrimitiveTypes.Float64}, Key{0.0}, "018000000000000000"},
		{"double -0", []iceberg.Type{iceberg.PrimitiveTypes.Float64}, Key{negZero64}, "017fffffffffffffff"},
		{"double -Inf", []iceberg.Type{iceberg.PrimitiveTypes.Float64}, Key{math.Inf(-1)}, "01000fffffffffffff"},
		{"decimal 14.20", []iceberg.Type{keyDecimal9}, Key{decimal128.FromI64(1420)}, "018000000000000000000000000000058c"},
		{"decimal -1.00", []iceberg.Type{keyDecimal9}, Key{decimal128.FromI64(-100)}, "017fffffffffffffffffffffffffffff9c"},
		{"empty string", []iceberg.Type{iceberg.PrimitiveTypes.String}, Key{""}, "010001"},
		{"string a NUL b", []iceberg.Type{iceberg.PrimitiveTypes.String}, Key{"a\x00b"}, "016100ff620001"},
		{"binary 00", []iceberg.Type{iceberg.PrimitiveTypes.Binary}, Key{[]byte{0}}, "0100ff0001"},
		{"binary ff 01", []iceberg.Type{iceberg.PrimitiveTypes.Binary}, Key{[]byte{0xff, 0x01}}, "01ff010001"},
		{"uuid", []iceberg.Type{iceberg.PrimitiveTypes.UUID}, Key{uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")}, "01f79c3e09677c4bbda4793f349cb785e7"},
		{"fixed[3]", []iceberg.Type{keyFixed3}, Key{[]byte{0, 1, 2}}, "01000102"},
		{"string a, long 2", []iceberg.Type{iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64}, Key{"a", int64(2)}, "01610001018000000000000002"},
		{"null, true, int -2", []iceberg.Type{iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Bool, iceberg.PrimitiveTypes.Int32}, Key{nil, true, int32(-2)}, "000101017ffffffe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := hex.DecodeString(tc.hex)
			if err != nil {
				t.Fatal(err)
			}
			got := mustAppendKey(t, tc.types, tc.key)
			if !bytes.Equal(got, want) {
				t.Errorf("AppendKey = %x, want %s", got, tc.hex)
			}
			k, rest, err := DecodeKey(want, tc.types)
			if err != nil {
				t.Fatalf("DecodeKey(%s): %v", tc.hex, err)
			}
			if len(rest) != 0 || !keysIdentical(tc.types, k, tc.key) {
				t.Errorf("DecodeKey(%s) = %v, rest %x; want %v", tc.hex, k, rest, tc.key)
			}
		})
	}
}

func TestAppendValueKeyIsOneField(t *testing.T) {
	types := []iceberg.Type{iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64}
	var b []byte
	for i, v := range []any{"a\x00", int64(-7)} {
		var err error
		if b, err = AppendValueKey(b, types[i], v); err != nil {
			t.Fatal(err)
		}
	}
	if want := mustAppendKey(t, types, Key{"a\x00", int64(-7)}); !bytes.Equal(b, want) {
		t.Errorf("AppendValueKey fields = %x, AppendKey = %x", b, want)
	}
}

func TestAppendKeyRejectsBadValues(t *testing.T) {
	list := &iceberg.ListType{ElementID: 1, Element: iceberg.PrimitiveTypes.Int32}
	tests := []struct {
		name  string
		types []iceberg.Type
		key   Key
		want  string
	}{
		{"wrong Go type", []iceberg.Type{iceberg.PrimitiveTypes.Int64}, Key{int32(1)}, "field 0 (long)"},
		{"string as binary", []iceberg.Type{iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Binary}, Key{int32(1), "x"}, "field 1 (binary)"},
		{"fixed length", []iceberg.Type{keyFixed3}, Key{[]byte{1, 2}}, "has 2 bytes"},
		{"non-primitive null", []iceberg.Type{list}, Key{nil}, "not a primitive type"},
		{"unknown type", []iceberg.Type{iceberg.PrimitiveTypes.Unknown}, Key{nil}, "not a primitive type"},
		{"too few values", []iceberg.Type{iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.Int64}, Key{int64(1)}, "1 values for 2 fields"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("prefix")
			got, err := AppendKey(dst, tc.types, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AppendKey error = %v, want one containing %q", err, tc.want)
			}
			if string(got) != "prefix" {
				t.Errorf("AppendKey returned %q on error, want dst unchanged", got)
			}
		})
	}
}

func TestDecodeKeyRejectsCorruptBytes(t *testing.T) {
	long, str := iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.String
	tests := []struct {
		name    string
		types   []iceberg.Type
		hex     string
		want    string
		corrupt bool
	}{
		{"empty", []iceberg.Type{long}, "", "field 0 (long) at byte 0: corrupt key: truncated: no tag byte", true},
		{"bad tag", []iceberg.Type{long}, "02", "tag 0x02", true},
		{"truncated long", []iceberg.Type{long}, "018000", "value needs 8 bytes, 2 left", true},
		{"bad boolean", []iceberg.Type{iceberg.PrimitiveTypes.Bool}, "0102", "boolean byte 0x02", true},
		{"truncated decimal", []iceberg.Type{keyDecimal}, "01800000000000000000000000000000", "value needs 16 bytes, 15 left", true},
		{"unterminated string", []iceberg.Type{str}, "016162", "no terminator", true},
		{"escape at end", []iceberg.Type{str}, "016100", "escape byte 0x00 at the end", true},
		{"escape at end after escaped nul", []iceberg.Type{str}, "0100ff00", "escape byte 0x00 at the end", true},
		{"bad escape", []iceberg.Type{str}, "01610002", "escape 0x00 0x02", true},
		{"bad escape after escaped nul", []iceberg.Type{iceberg.PrimitiveTypes.Binary}, "0100ff0000", "escape 0x00 0x00", true},
		{"short fixed", []iceberg.Type{keyFixed3}, "010102", "value needs 3 bytes, 2 left", true},
		{"short uuid", []iceberg.Type{iceberg.PrimitiveTypes.UUID}, "01f79c3e09", "value needs 16 bytes, 4 left", true},
		{"second field", []iceberg.Type{iceberg.PrimitiveTypes.Int32, str}, "018000000001", "field 1 (string) at byte 5", true},
		{"non-primitive type", []iceberg.Type{&iceberg.ListType{ElementID: 1, Element: long}}, "00", "field 0: type list<long> is not a primitive type", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := hex.DecodeString(tc.hex)
			if err != nil {
				t.Fatal(err)
			}
			k, rest, err := DecodeKey(data, tc.types)
			if err == nil {
				t.Fatalf("DecodeKey(%s) = %v, rest %x; want an error", tc.hex, k, rest)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeKey(%s) error = %q, want one containing %q", tc.hex, err, tc.want)
			}
			if errors.Is(err, ErrCorruptKey) != tc.corrupt {
				t.Errorf("errors.Is(%v, ErrCorruptKey) = %v, want %v", err, !tc.corrupt, tc.corrupt)
			}
		})
	}
}

func TestKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	trailer := []byte{0x00, 0xff, 0x42}
	for _, tc := range keyOrderCases {
		t.Run(tc.name, func(t *testing.T) {
			types := []iceberg.Type{tc.t, iceberg.PrimitiveTypes.String, tc.t}
			for range 500 {
				k := Key{randomKeyValue(r, tc.t), randomKeyValue(r, iceberg.PrimitiveTypes.String), randomKeyValue(r, tc.t)}
				enc := append(mustAppendKey(t, types, k), trailer...)
				got, rest, err := DecodeKey(enc, types)
				if err != nil {
					t.Fatalf("DecodeKey(%x) of %v: %v", enc, k, err)
				}
				if !bytes.Equal(rest, trailer) {
					t.Fatalf("DecodeKey(%x) rest = %x, want %x", enc, rest, trailer)
				}
				if !keysIdentical(types, got, k) {
					t.Fatalf("DecodeKey(AppendKey(%v)) = %v", k, got)
				}
			}
		})
	}
}

func TestDecodeKeyDoesNotAliasInput(t *testing.T) {
	types := []iceberg.Type{iceberg.PrimitiveTypes.Binary, keyFixed3, iceberg.PrimitiveTypes.Binary}
	want := Key{[]byte("abc"), []byte("xyz"), []byte{0, 1}}
	enc := mustAppendKey(t, types, want)
	k, _, err := DecodeKey(enc, types)
	if err != nil {
		t.Fatal(err)
	}
	clear(enc)
	if !keysIdentical(types, k, want) {
		t.Errorf("decoded key changed with its input: %v, want %v", k, want)
	}
}

// TestKeyEncodingOrderMatchesCompareKeys checks the central promise on random
// pairs biased towards edge values and shared prefixes, for keys alone and
// for key ++ identity.
func TestKeyEncodingOrderMatchesCompareKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	decidedLate := 0 // pairs equal on the first field: the generator must produce many
	for range 20000 {
		types := randomKeyTypes(r, 1+r.IntN(4))
		a, b := randomKeyPair(r, types)
		ea, eb := mustAppendKey(t, types, a), mustAppendKey(t, types, b)
		if got, want := sign(bytes.Compare(ea, eb)), sign(CompareKeys(types, a, b)); got != want {
			t.Fatalf("types %v: keys %v and %v: bytes.Compare(%x, %x) = %d, CompareKeys = %d",
				types, a, b, ea, eb, got, want)
		}
		if Compare(types[0], a[0], b[0]) == 0 {
			decidedLate++
		}

		idTypes := randomKeyTypes(r, 1+r.IntN(3))
		ia, ib := randomKeyPair(r, idTypes)
		ca := append(ea, mustAppendKey(t, idTypes, ia)...)
		cb := append(eb, mustAppendKey(t, idTypes, ib)...)
		all := append(append([]iceberg.Type{}, types...), idTypes...)
		ka, kb := append(append(Key{}, a...), ia...), append(append(Key{}, b...), ib...)
		if got, want := sign(bytes.Compare(ca, cb)), sign(CompareKeys(all, ka, kb)); got != want {
			t.Fatalf("types %v: tuples %v and %v: bytes.Compare(%x, %x) = %d, CompareKeys = %d",
				all, ka, kb, ca, cb, got, want)
		}
	}
	if decidedLate < 5000 {
		t.Fatalf("only %d of 20000 pairs share their first field; the generator does not test later fields", decidedLate)
	}
}

func BenchmarkAppendKey(b *testing.B) {
	types := []iceberg.Type{iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Timestamp}
	k := Key{int64(123456789), "customer-000042", int64(1510871468000000)}
	buf := make([]byte, 0, 64)
	for b.Loop() {
		var err error
		if buf, err = AppendKey(buf[:0], types, k); err != nil {
			b.Fatal(err)
		}
	}
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// keysIdentical reports whether two keys hold the same values, floats
// compared bit for bit (the sign of zero and NaN included).
func keysIdentical(types []iceberg.Type, a, b Key) bool {
	if len(a) != len(types) || len(b) != len(types) {
		return false
	}
	for i, t := range types {
		if (a[i] == nil) != (b[i] == nil) || Compare(t, a[i], b[i]) != 0 {
			return false
		}
		switch x := a[i].(type) {
		case float32:
			if math.Float32bits(x) != math.Float32bits(b[i].(float32)) {
				return false
			}
		case float64:
			if math.Float64bits(x) != math.Float64bits(b[i].(float64)) {
				return false
			}
		}
	}
	return true
}

func randomKeyTypes(r *rand.Rand, n int) []iceberg.Type {
	types := make([]iceberg.Type, n)
	for i := range types {
		types[i] = keyOrderCases[r.IntN(len(keyOrderCases))].t
	}
	return types
}

// randomKeyPair returns two keys that share a random number of leading
// fields; the fields after that are drawn independently, so often equal too.
func randomKeyPair(r *rand.Rand, types []iceberg.Type) (Key, Key) {
	a, b := make(Key, len(types)), make(Key, len(types))
	shared := r.IntN(len(types) + 1)
	for i, t := range types {
		a[i] = randomKeyValue(r, t)
		if i < shared {
			b[i] = a[i]
		} else {
			b[i] = randomKeyValue(r, t)
		}
	}
	return a, b
}

// randomKeyValue draws a value of type t: half the time an edge value from
// keyOrderCases (null included), otherwise from a narrow range or a small
// byte alphabet so that equal values and shared prefixes are common, or from
// the full range of the type.
func randomKeyValue(r *rand.Rand, t iceberg.Type) any {
	if r.IntN(2) == 0 {
		for _, tc := range keyOrderCases {
			if tc.t == t {
				return tc.values[r.IntN(len(tc.values))]
			}
		}
	}
	full := r.IntN(4) == 0
	small := func() int64 { return int64(r.IntN(7) - 3) }
	switch t := t.(type) {
	case iceberg.BooleanType:
		return r.IntN(2) == 0
	case iceberg.Int32Type, iceberg.DateType:
		if full {
			return int32(r.Uint32())
		}
		return int32(small())
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		if full {
			return int64(r.Uint64())
		}
		return small()
	case iceberg.Float32Type:
		if full {
			return math.Float32frombits(r.Uint32()) // every NaN payload too
		}
		return float32(small()) / 2
	case iceberg.Float64Type:
		if full {
			return math.Float64frombits(r.Uint64())
		}
		return float64(small()) / 2
	case iceberg.DecimalType:
		if full {
			return decimal128.New(int64(r.Uint64()), r.Uint64())
		}
		return decimal128.FromI64(small())
	case iceberg.StringType:
		return string(randomKeyBytes(r, r.IntN(5)))
	case iceberg.BinaryType:
		return randomKeyBytes(r, r.IntN(5))
	case iceberg.UUIDType:
		return uuid.UUID(randomKeyBytes(r, 16))
	case iceberg.FixedType:
		return randomKeyBytes(r, t.Len())
	}
	panic("randomKeyValue: unsupported type " + t.String())
}

func randomKeyBytes(r *rand.Rand, n int) []byte {
	const alphabet = "\x00\x01a\xfe\xff"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return b
}

// BenchmarkAppendKeyPath encodes the entry of a primary-key index with
// `_file`, whose long path the key escapes.
func BenchmarkAppendKeyPath(b *testing.B) {
	types := []iceberg.Type{iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64}
	k := Key{int64(9_999_123), "file:///var/lib/streamidx/warehouse/bench.db/orders/data/00049-0-6f1c2a7e-9b3d-4d0e-8f0a-2b6c9d1e4f57-00001.parquet", int64(18_211)}
	buf := make([]byte, 0, 256)
	for b.Loop() {
		var err error
		if buf, err = AppendKey(buf[:0], types, k); err != nil {
			b.Fatal(err)
		}
	}
}
