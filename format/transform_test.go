package format

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/twmb/murmur3"
)

var (
	tInt         = iceberg.PrimitiveTypes.Int32
	tLong        = iceberg.PrimitiveTypes.Int64
	tDate        = iceberg.PrimitiveTypes.Date
	tTime        = iceberg.PrimitiveTypes.Time
	tTimestamp   = iceberg.PrimitiveTypes.Timestamp
	tTimestampTz = iceberg.PrimitiveTypes.TimestampTz
	tTimestampNs = iceberg.PrimitiveTypes.TimestampNs
	tTsTzNs      = iceberg.PrimitiveTypes.TimestampTzNs
	tString      = iceberg.PrimitiveTypes.String
	tBinary      = iceberg.PrimitiveTypes.Binary
	tUUID        = iceberg.PrimitiveTypes.UUID
	tBool        = iceberg.PrimitiveTypes.Bool
)

// micros of 2017-11-16T22:31:08 UTC, the instant of the spec's test vectors.
var specInstant = time.Date(2017, 11, 16, 22, 31, 8, 0, time.UTC).UnixMicro()

func TestBucketHashSpecVectors(t *testing.T) {
	cases := []struct {
		name string
		typ  iceberg.Type
		v    any
		want int32
	}{
		{"int 34", tInt, int32(34), 2017239379},
		{"long 34", tLong, int64(34), 2017239379},
		{"decimal 14.20", iceberg.DecimalTypeOf(4, 2), decimal128.FromI64(1420), -500754589},
		{"decimal 14.20 wide", iceberg.DecimalTypeOf(38, 2), decimal128.FromI64(1420), -500754589},
		{"date 2017-11-16", tDate, int32(17486), -653330422},
		{"time 22:31:08", tTime, int64((22*3600 + 31*60 + 8) * 1_000_000), -662762989},
		{"timestamp", tTimestamp, specInstant, -2047944441},
		{"timestamptz", tTimestampTz, specInstant, -2047944441},
		{"timestamp +1us", tTimestamp, specInstant + 1, -1207196810},
		{"timestamp_ns same instant", tTimestampNs, specInstant * 1000, -2047944441},
		{"timestamptz_ns same instant", tTsTzNs, specInstant * 1000, -2047944441},
		{"timestamp_ns +1us", tTimestampNs, (specInstant + 1) * 1000, -1207196810},
		{"timestamp_ns sub-micro floors", tTimestampNs, specInstant*1000 + 999, -2047944441},
		{"string iceberg", tString, "iceberg", 1210000089},
		{"uuid", tUUID, uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7"), 1488055340},
		{"fixed 00010203", iceberg.FixedTypeOf(4), []byte{0, 1, 2, 3}, -188683207},
		{"binary 00010203", tBinary, []byte{0, 1, 2, 3}, -188683207},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := BucketHash(c.typ, c.v)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("BucketHash = %d, want %d", got, c.want)
			}
		})
	}
}

func TestBucketHashNegativeNanosFloor(t *testing.T) {
	// -1 ns is in the microsecond before the epoch, -1 us, not 0.
	ns, err := BucketHash(tTimestampNs, int64(-1))
	if err != nil {
		t.Fatal(err)
	}
	us, _ := BucketHash(tTimestamp, int64(-1))
	zero, _ := BucketHash(tTimestamp, int64(0))
	if ns != us || ns == zero {
		t.Errorf("hash(-1ns) = %d, want hash(-1us) = %d (hash(0) = %d)", ns, us, zero)
	}
}

func TestHashLongIsMurmur3OfLittleEndianLong(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	values := []int64{0, 1, -1, 34, math.MaxInt64, math.MinInt64}
	for range 1000 {
		values = append(values, int64(r.Uint64()))
	}
	var b [8]byte
	for _, v := range values {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		if got, want := hashLong(v), murmur3.Sum32(b[:]); got != want {
			t.Fatalf("hashLong(%d) = %d, murmur3 = %d", v, got, want)
		}
	}
}

func TestDecimalHashBytesMinimalTwosComplement(t *testing.T) {
	cases := []struct {
		v    decimal128.Num
		want []byte
	}{
		{decimal128.FromI64(0), []byte{0x00}},
		{decimal128.FromI64(1), []byte{0x01}},
		{decimal128.FromI64(-1), []byte{0xff}},
		{decimal128.FromI64(127), []byte{0x7f}},
		{decimal128.FromI64(128), []byte{0x00, 0x80}},
		{decimal128.FromI64(-128), []byte{0x80}},
		{decimal128.FromI64(-129), []byte{0xff, 0x7f}},
		{decimal128.FromI64(1420), []byte{0x05, 0x8c}},
		{decimal128.FromI64(math.MinInt64), []byte{0x80, 0, 0, 0, 0, 0, 0, 0}},
		{decimal128.New(1, 0), []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0}},
		{decimal128.New(-1, 0), []byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		var buf [16]byte
		if got := decimalHashBytes(c.v, &buf); !bytes.Equal(got, c.want) {
			t.Errorf("decimalHashBytes(%s) = %x, want %x", c.v.BigInt(), got, c.want)
		}
	}
}

func TestTransformValueBucket(t *testing.T) {
	cases := []struct {
		typ  iceberg.Type
		v    any
		n    int
		want int32
	}{
		{tInt, int32(34), 16, 3},
		{tLong, int64(34), 1000, 379},
		{iceberg.DecimalTypeOf(4, 2), decimal128.FromI64(1420), 16, 3},
		{tDate, int32(17486), 16, 10},
		{tTimestamp, specInstant, 1000, 207},
		{tTimestampNs, specInstant * 1000, 1000, 207},
		{tTimestamp, specInstant + 1, 16, 6},
		{tString, "iceberg", 16, 9},
		{tUUID, uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7"), 16, 12},
		{tBinary, []byte{0, 1, 2, 3}, 1000, 441},
		{tLong, int64(34), 1, 0},
	}
	for _, c := range cases {
		got, err := TransformValue("bucket", c.n, c.typ, c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("bucket[%d](%s %v) = %v, want %d", c.n, c.typ, c.v, got, c.want)
		}
	}
}

func TestTransformValueTruncate(t *testing.T) {
	dec := iceberg.DecimalTypeOf(9, 2)
	cases := []struct {
		name string
		typ  iceberg.Type
		w    int
		v    any
		want any
	}{
		{"int 1", tInt, 10, int32(1), int32(0)},
		{"int -1", tInt, 10, int32(-1), int32(-10)},
		{"int 10", tInt, 10, int32(10), int32(10)},
		{"int -10", tInt, 10, int32(-10), int32(-10)},
		{"int wide width", tInt, math.MaxInt32, int32(-1), int32(-math.MaxInt32)},
		{"long 1", tLong, 10, int64(1), int64(0)},
		{"long -1", tLong, 10, int64(-1), int64(-10)},
		{"long big", tLong, 1000, int64(1234567890123), int64(1234567890000)},
		{"decimal 10.65", dec, 50, decimal128.FromI64(1065), decimal128.FromI64(1050)},
		{"decimal -0.05", dec, 50, decimal128.FromI64(-5), decimal128.FromI64(-50)},
		{"decimal 0.50", dec, 50, decimal128.FromI64(50), decimal128.FromI64(50)},
		{"string ascii", tString, 3, "iceberg", "ice"},
		{"string short", tString, 3, "ab", "ab"},
		{"string exact", tString, 3, "abc", "abc"},
		{"string katakana", tString, 3, "イceberg", "イce"},
		{"string katakana only", tString, 2, "イイイ", "イイ"},
		{"string emoji", tString, 2, "😀😁😂🤣", "😀😁"},
		{"string emoji fits bytes", tString, 4, "😀😁", "😀😁"},
		{"binary", tBinary, 3, []byte{1, 2, 3, 4, 5}, []byte{1, 2, 3}},
		{"binary short", tBinary, 3, []byte{1, 2}, []byte{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := TransformValue("truncate", c.w, c.typ, c.v)
			if err != nil {
				t.Fatal(err)
			}
			if Compare(c.typ, got, c.want) != 0 {
				t.Errorf("truncate[%d](%v) = %v, want %v", c.w, FormatValue(c.typ, c.v), FormatValue(c.typ, got), FormatValue(c.typ, c.want))
			}
			if s, ok := got.(string); ok && !utf8.ValidString(s) {
				t.Errorf("truncate produced invalid UTF-8 %q", s)
			}
		})
	}
}

func TestTruncatedStringsAreValidCodePointPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		s := randomString(r)
		l := 1 + r.IntN(6)
		got, err := TransformValue("truncate", l, tString, s)
		if err != nil {
			t.Fatal(err)
		}
		want := s
		if runes := []rune(s); len(runes) > l {
			want = string(runes[:l])
		}
		if got != want {
			t.Fatalf("truncate[%d](%q) = %q, want %q", l, s, got, want)
		}
	}
}

func TestTransformValueTime(t *testing.T) {
	beforeEpoch := time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)
	spec := time.UnixMicro(specInstant).UTC()
	cases := []struct {
		name                    string
		typ                     iceberg.Type
		v                       any
		year, month, day, hour  int32
		hourUnsupportedForDates bool
	}{
		{"timestamp before epoch", tTimestamp, beforeEpoch.UnixMicro(), -1, -1, -1, -1, false},
		{"timestamptz before epoch", tTimestampTz, beforeEpoch.UnixMicro(), -1, -1, -1, -1, false},
		{"timestamp_ns before epoch", tTimestampNs, beforeEpoch.UnixNano(), -1, -1, -1, -1, false},
		{"timestamptz_ns -1ns", tTsTzNs, int64(-1), -1, -1, -1, -1, false},
		{"timestamp epoch", tTimestamp, int64(0), 0, 0, 0, 0, false},
		{"timestamp 2017-11-16T22:31:08", tTimestamp, specInstant, 47, 47*12 + 10, 17486, 17486*24 + 22, false},
		{"timestamp_ns 2017-11-16T22:31:08", tTimestampNs, spec.UnixNano(), 47, 47*12 + 10, 17486, 17486*24 + 22, false},
		{"date 2017-11-16", tDate, int32(17486), 47, 47*12 + 10, 17486, 0, true},
		{"date 1969-12-31", tDate, int32(-1), -1, -1, -1, 0, true},
		{"date 1900-03-01", tDate, daysOf(1900, 3, 1), -70, -70*12 + 2, daysOf(1900, 3, 1), 0, true},
		{"date 2000-02-29", tDate, daysOf(2000, 2, 29), 30, 30*12 + 1, daysOf(2000, 2, 29), 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, fc := range []struct {
				fn   string
				want int32
			}{{"year", c.year}, {"month", c.month}, {"day", c.day}, {"hour", c.hour}} {
				got, err := TransformValue(fc.fn, 0, c.typ, c.v)
				if fc.fn == "hour" && c.hourUnsupportedForDates {
					if err == nil {
						t.Errorf("hour of a date: no error")
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != fc.want {
					t.Errorf("%s = %v, want %d", fc.fn, got, fc.want)
				}
			}
		})
	}
}

func daysOf(y int, m time.Month, d int) int32 {
	return int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

func TestCivilFromDaysAgreesWithTimePackage(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		days := r.Int64N(4_000_000) - 2_000_000 // about ±5,500 years
		tm := time.Unix(days*86400, 0).UTC()
		y, m := civilFromDays(days)
		if y != int64(tm.Year()) || m != int64(tm.Month()) {
			t.Fatalf("civilFromDays(%d) = %d-%d, want %s", days, y, m, tm.Format("2006-01"))
		}
	}
}

func TestTransformValueIdentityNull(t *testing.T) {
	for _, fn := range []string{"identity", "bucket", "truncate", "year", "month", "day", "hour"} {
		got, err := TransformValue(fn, 4, tTimestamp, nil)
		if fn == "truncate" {
			if err == nil {
				t.Errorf("truncate of a timestamp: no error")
			}
			continue
		}
		if err != nil || got != nil {
			t.Errorf("%s(null) = %v, %v; want null", fn, got, err)
		}
	}
	if got, _ := TransformValue("identity", 0, tString, "x"); got != "x" {
		t.Errorf("identity(x) = %v", got)
	}
	if _, err := TransformValue("void", 0, tString, "x"); err == nil {
		t.Errorf("void(x): no error; void is not an iceberg_functions function")
	}
}

func TestTransformValueErrors(t *testing.T) {
	cases := []struct {
		fn    string
		param int
		typ   iceberg.Type
		v     any
		want  string
	}{
		{"bucket", 16, tBool, true, "bucket cannot be applied to type boolean"},
		{"bucket", 16, iceberg.PrimitiveTypes.Float64, 1.0, "bucket cannot be applied to type double"},
		{"truncate", 4, iceberg.FixedTypeOf(4), []byte{1, 2, 3, 4}, "truncate cannot be applied to type fixed[4]"},
		{"truncate", 4, tUUID, uuid.New(), "truncate cannot be applied to type uuid"},
		{"hour", 0, tDate, int32(1), "hour cannot be applied to type date"},
		{"year", 0, tTime, int64(1), "year cannot be applied to type time"},
		{"bucket", 0, tLong, int64(1), "positive"},
		{"truncate", -3, tLong, int64(1), "positive"},
		{"bucket", 16, tLong, int32(1), "is not a long"},
		{"zorder", 0, tLong, int64(1), `unknown function "zorder"`},
	}
	for _, c := range cases {
		_, err := TransformValue(c.fn, c.param, c.typ, c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s[%d](%s %v): error %v, want one containing %q", c.fn, c.param, c.typ, c.v, err, c.want)
		}
	}
}

func TestResultType(t *testing.T) {
	structType := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 11, Name: "x", Type: tInt}}}
	fields := map[int]iceberg.Type{
		1: tInt, 2: tLong, 3: tString, 4: tDate, 5: tTimestampTz, 6: iceberg.DecimalTypeOf(10, 3),
		7: tBool, 8: structType, 9: tTimestampNs, 10: iceberg.FixedTypeOf(16), 12: tUUID, 13: tTime,
	}
	fieldType := func(id int) (iceberg.Type, bool) {
		if _, typ, ok := MetadataColumn(id); ok {
			return typ, true
		}
		typ, ok := fields[id]
		return typ, ok
	}
	ok := []struct {
		expr string
		want iceberg.Type
	}{
		{`{"type":"reference","id":3}`, tString},
		{`{"type":"reference","id":2147483646}`, tString},
		{`{"type":"apply","function":"bucket","arguments":[16,{"type":"reference","id":2147483645}]}`, tInt},
		{`{"type":"apply","function":"bucket","arguments":[16,{"type":"reference","id":2}]}`, tInt},
		{`{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["bucket"]},"arguments":[{"type":"literal","value":8},{"type":"reference","id":6}]}`, tInt},
		{`{"type":"apply","function":"bucket","arguments":[4,{"type":"reference","id":10}]}`, tInt},
		{`{"type":"apply","function":"bucket","arguments":[4,{"type":"reference","id":12}]}`, tInt},
		{`{"type":"apply","function":"bucket","arguments":[4,{"type":"reference","id":13}]}`, tInt},
		{`{"type":"apply","function":"truncate","arguments":[3,{"type":"reference","id":3}]}`, tString},
		{`{"type":"apply","function":"truncate","arguments":[50,{"type":"reference","id":6}]}`, iceberg.DecimalTypeOf(10, 3)},
		{`{"type":"apply","function":"truncate","arguments":[10,{"type":"reference","id":1}]}`, tInt},
		{`{"type":"apply","function":"year","arguments":[{"type":"reference","id":4}]}`, tInt},
		{`{"type":"apply","function":"month","arguments":[{"type":"reference","id":9}]}`, tInt},
		{`{"type":"apply","function":"day","arguments":[{"type":"reference","id":5}]}`, tDate},
		{`{"type":"apply","function":"hour","arguments":[{"type":"reference","id":5}]}`, tInt},
		{`{"type":"apply","function":"identity","arguments":[{"type":"reference","id":6}]}`, iceberg.DecimalTypeOf(10, 3)},
		{`{"type":"apply","function":"year","arguments":[{"type":"apply","function":"day","arguments":[{"type":"reference","id":5}]}]}`, tInt},
		{`{"type":"apply","function":"bucket","arguments":[4,{"type":"apply","function":"truncate","arguments":[3,{"type":"reference","id":3}]}]}`, tInt},
	}
	for _, c := range ok {
		e, err := ParseExpr([]byte(c.expr))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResultType(e, fieldType)
		if err != nil {
			t.Errorf("ResultType(%s): %v", e, err)
			continue
		}
		if !got.Equals(c.want) {
			t.Errorf("ResultType(%s) = %s, want %s", e, got, c.want)
		}
	}

	bad := []struct {
		expr string
		want []string // every fragment must appear in the error
	}{
		{`{"type":"reference","id":99}`, []string{"unknown field ID 99"}},
		{`{"type":"reference","id":2147483644}`, []string{"unknown field ID 2147483644"}},
		{`16`, []string{"literal 16", "only transform parameters"}},
		{`{"type":"literal","value":"x"}`, []string{"literal"}},
		{`{"type":"apply","function":"bucket","arguments":[16,{"type":"reference","id":7}]}`, []string{"bucket", "boolean"}},
		{`{"type":"apply","function":"truncate","arguments":[4,{"type":"reference","id":4}]}`, []string{"truncate", "date"}},
		{`{"type":"apply","function":"truncate","arguments":[4,{"type":"reference","id":10}]}`, []string{"truncate", "fixed[16]"}},
		{`{"type":"apply","function":"hour","arguments":[{"type":"reference","id":4}]}`, []string{"hour", "date"}},
		{`{"type":"apply","function":"year","arguments":[{"type":"reference","id":3}]}`, []string{"year", "string"}},
		{`{"type":"apply","function":"day","arguments":[{"type":"reference","id":13}]}`, []string{"day", "time"}},
		{`{"type":"apply","function":"identity","arguments":[{"type":"reference","id":8}]}`, []string{"identity", "struct"}},
		{`{"type":"apply","function":"bucket","arguments":[0,{"type":"reference","id":2}]}`, []string{"bucket", "positive"}},
		{`{"type":"apply","function":"bucket","arguments":[-4,{"type":"reference","id":2}]}`, []string{"bucket", "positive"}},
		{`{"type":"apply","function":"bucket","arguments":[2.5,{"type":"reference","id":2}]}`, []string{"bucket", "positive"}},
		{`{"type":"apply","function":"bucket","arguments":["16",{"type":"reference","id":2}]}`, []string{"bucket", "positive"}},
		{`{"type":"apply","function":"bucket","arguments":[{"type":"reference","id":2},16]}`, []string{"bucket", "first argument"}},
		{`{"type":"apply","function":"bucket","arguments":[16]}`, []string{"bucket takes 2 arguments"}},
		{`{"type":"apply","function":"bucket","arguments":[16,5]}`, []string{"bucket", "literal"}},
		{`{"type":"apply","function":"year","arguments":[{"type":"reference","id":4},{"type":"reference","id":4}]}`, []string{"year takes 1 argument"}},
		{`{"type":"apply","function":"year","arguments":[2017]}`, []string{"year", "literal"}},
		{`{"type":"apply","function":"lower","arguments":[{"type":"reference","id":3}]}`, []string{`unknown function "lower"`}},
		{`{"type":"apply","function":{"catalog":"my_udfs","identifier":["bucket"]},"arguments":[16,{"type":"reference","id":2}]}`, []string{"my_udfs", "iceberg_functions"}},
		{`{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["a","bucket"]},"arguments":[16,{"type":"reference","id":2}]}`, []string{"bucket"}},
		{`{"type":"apply","function":"bucket","arguments":[4,{"type":"apply","function":"truncate","arguments":[3,{"type":"reference","id":7}]}]}`, []string{"truncate", "boolean"}},
		{`{"type":"apply","function":"hour","arguments":[{"type":"apply","function":"day","arguments":[{"type":"reference","id":5}]}]}`, []string{"hour", "date"}},
		{`{"type":"apply","function":"bucket","arguments":[4,{"type":"reference","id":404}]}`, []string{"unknown field ID 404"}},
	}
	for _, c := range bad {
		e, err := ParseExpr([]byte(c.expr))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResultType(e, fieldType)
		if err == nil {
			t.Errorf("ResultType(%s) = %s, want an error", c.expr, got)
			continue
		}
		for _, frag := range c.want {
			if !strings.Contains(err.Error(), frag) {
				t.Errorf("ResultType(%s): error %q lacks %q", c.expr, err, frag)
			}
		}
	}
}

// randomString mixes ASCII, 2-, 3- and 4-byte UTF-8 sequences.
func randomString(r *rand.Rand) string {
	alphabet := []rune{'a', 'b', 'z', '0', 'é', 'ß', 'イ', '中', '😀', '🤣'}
	n := r.IntN(9)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}
