package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/twmb/murmur3"
)

// Index expressions apply the functions of the expressions spec's
// iceberg_functions catalog that are partition transforms. void is not one
// of them: the spec leaves it out, and a field that is always null has no
// use in an index.
const (
	fnIdentity = "identity"
	fnBucket   = "bucket"
	fnTruncate = "truncate"
	fnYear     = "year"
	fnMonth    = "month"
	fnDay      = "day"
	fnHour     = "hour"
)

// call is an application of a transform taken apart: its name, its integer
// parameter (bucket's N, truncate's W; 0 for the others) and the value
// argument.
type call struct {
	name  string
	param int
	arg   Expr
}

// parseCall checks the shape of an application: a known function of the
// iceberg_functions catalog, a positive integer literal first for bucket and
// truncate, and exactly one value argument.
func parseCall(a Apply) (call, error) {
	f := a.Function
	if !f.IsBuiltin() {
		return call{}, fmt.Errorf("function %s: only functions of the %s catalog are supported",
			describeFunction(f), IcebergFunctionsCatalog)
	}
	c := call{name: f.Name}
	args := a.Args
	switch f.Name {
	case fnBucket, fnTruncate:
		if len(args) != 2 {
			return call{}, fmt.Errorf("%s takes 2 arguments (a positive integer literal, then a value), got %d", f.Name, len(args))
		}
		lit, ok := args[0].(Lit)
		if !ok {
			return call{}, fmt.Errorf("%s: first argument %s must be a positive integer literal", f.Name, args[0])
		}
		n, err := lit.Int()
		if err != nil || n <= 0 {
			return call{}, fmt.Errorf("%s: parameter %s must be a positive 32-bit integer", f.Name, lit)
		}
		if lit.DataType != nil && !lit.DataType.Equals(iceberg.PrimitiveTypes.Int32) {
			return call{}, fmt.Errorf("%s: parameter %s has data-type %s; the spec's parameter is an int", f.Name, lit, lit.DataType)
		}
		c.param, c.arg = n, args[1]
	case fnIdentity, fnYear, fnMonth, fnDay, fnHour:
		if len(args) != 1 {
			return call{}, fmt.Errorf("%s takes 1 argument, got %d", f.Name, len(args))
		}
		c.arg = args[0]
	case "void":
		return call{}, errors.New(`"void" is not an iceberg_functions function (the expressions spec leaves the void transform out): ` +
			"a field that is always null has no use in an index")
	default:
		return call{}, fmt.Errorf("unknown function %q", f.Name)
	}
	if lit, ok := c.arg.(Lit); ok {
		return call{}, fmt.Errorf("%s: argument %s is a literal; it needs a field reference or a transform of one", f.Name, lit)
	}
	return c, nil
}

// ResultType type-checks an index expression and returns the type of the
// values it produces, so that a definition's declared data-type can be
// checked before any row is read. fieldType resolves referenced field IDs:
// source schema fields and metadata columns.
func ResultType(e Expr, fieldType func(id int) (iceberg.Type, bool)) (iceberg.Type, error) {
	t, err := resultType(e, fieldType)
	if err != nil {
		return nil, fmt.Errorf("type-check %s: %w", e, err)
	}
	return t, nil
}

func resultType(e Expr, fieldType func(id int) (iceberg.Type, bool)) (iceberg.Type, error) {
	switch e := e.(type) {
	case Ref:
		t, ok := fieldType(e.ID)
		if !ok {
			return nil, fmt.Errorf("unknown field ID %d", e.ID)
		}
		return t, nil
	case Lit:
		return nil, fmt.Errorf("literal %s is not a value; literals are only transform parameters", e)
	case Apply:
		c, err := parseCall(e)
		if err != nil {
			return nil, err
		}
		src, err := resultType(c.arg, fieldType)
		if err != nil {
			return nil, err
		}
		return transformResult(c.name, src)
	case nil:
		return nil, errors.New("nil expression")
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

// transformResult is the table spec's table of transforms: the source types
// each accepts and the type it produces.
func transformResult(fn string, src iceberg.Type) (iceberg.Type, error) {
	ok := false
	var result iceberg.Type
	switch fn {
	case fnIdentity:
		ok, result = IsPrimitive(src), src
	case fnBucket:
		switch src.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.DecimalType, iceberg.DateType, iceberg.TimeType,
			iceberg.TimestampType, iceberg.TimestampTzType, iceberg.TimestampNsType, iceberg.TimestampTzNsType,
			iceberg.StringType, iceberg.UUIDType, iceberg.FixedType, iceberg.BinaryType:
			ok, result = true, iceberg.PrimitiveTypes.Int32
		}
	case fnTruncate:
		switch src.(type) {
		case iceberg.Int32Type, iceberg.Int64Type, iceberg.DecimalType, iceberg.StringType, iceberg.BinaryType:
			ok, result = true, src
		}
	case fnYear, fnMonth, fnDay:
		switch src.(type) {
		case iceberg.DateType, iceberg.TimestampType, iceberg.TimestampTzType, iceberg.TimestampNsType,
			iceberg.TimestampTzNsType:
			ok, result = true, iceberg.PrimitiveTypes.Int32
			if fn == fnDay {
				result = iceberg.PrimitiveTypes.Date
			}
		}
	case fnHour:
		switch src.(type) {
		case iceberg.TimestampType, iceberg.TimestampTzType, iceberg.TimestampNsType, iceberg.TimestampTzNsType:
			ok, result = true, iceberg.PrimitiveTypes.Int32
		}
	default:
		return nil, fmt.Errorf("unknown function %q", fn)
	}
	if !ok {
		return nil, fmt.Errorf("%s cannot be applied to type %s", fn, src)
	}
	return result, nil
}

// describeFunction renders a function reference as catalog.ns.name.
func describeFunction(f Function) string {
	parts := f.Identifier
	if f.Catalog != "" {
		parts = append([]string{f.Catalog}, parts...)
	}
	return strconv.Quote(strings.Join(parts, "."))
}

// TransformValue applies one transform to one canonical value of type src
// (see Key), the way Evaluate does to a column: predicate projection and
// tests need the single-value form. param is bucket's N or truncate's W and
// is ignored by the other functions. Null gives null.
func TransformValue(fn string, param int, src iceberg.Type, v any) (any, error) {
	if _, err := transformResult(fn, src); err != nil {
		return nil, err
	}
	if (fn == fnBucket || fn == fnTruncate) && (param <= 0 || param > math.MaxInt32) {
		return nil, fmt.Errorf("%s: parameter %d must be a positive 32-bit integer", fn, param)
	}
	if v == nil {
		return nil, nil
	}
	if err := CheckValue(src, v); err != nil { // every source type left is primitive
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	switch fn {
	case fnIdentity:
		return v, nil
	case fnBucket:
		h, err := BucketHash(src, v)
		if err != nil {
			return nil, err
		}
		return bucketOf(uint32(h), uint32(param)), nil
	case fnTruncate:
		return truncateValue(param, src, v), nil
	}
	return timeTransform(fn, src, v), nil
}

// BucketHash is the 32-bit Murmur3 hash (x86 variant, seed 0) that the bucket
// transform takes modulo N, computed on the bytes the table spec assigns to
// each type. Engines must agree on it bit for bit, so it is exported for the
// spec's test vectors:
//
//	int, long, date          the value as a long, 8 bytes little-endian
//	time                     microseconds from midnight, as a long
//	timestamp, timestamptz   microseconds from the epoch, as a long
//	timestamp(tz)_ns         nanoseconds floor-divided by 1000, as a long, so
//	                         equal instants hash alike at both precisions
//	decimal                  the unscaled value's minimum-length two's
//	                         complement big-endian bytes
//	string                   its UTF-8 bytes
//	uuid                     its 16 bytes, big-endian
//	fixed, binary            the bytes
func BucketHash(t iceberg.Type, v any) (int32, error) {
	if v == nil {
		return 0, errors.New("bucket hash of null: null has no hash")
	}
	var h uint32
	ok := false
	switch t.(type) {
	case iceberg.Int32Type, iceberg.DateType:
		var x int32
		if x, ok = v.(int32); ok {
			h = hashLong(int64(x))
		}
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType:
		var x int64
		if x, ok = v.(int64); ok {
			h = hashLong(x)
		}
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		var x int64
		if x, ok = v.(int64); ok {
			h = hashLong(floorDiv(x, 1000))
		}
	case iceberg.DecimalType:
		var x decimal128.Num
		if x, ok = v.(decimal128.Num); ok {
			var buf [16]byte
			h = murmur3.Sum32(decimalHashBytes(x, &buf))
		}
	case iceberg.StringType:
		var x string
		if x, ok = v.(string); ok {
			h = murmur3.StringSum32(x)
		}
	case iceberg.UUIDType:
		var x uuid.UUID
		if x, ok = v.(uuid.UUID); ok {
			h = murmur3.Sum32(x[:])
		}
	case iceberg.FixedType, iceberg.BinaryType:
		var x []byte
		if x, ok = v.([]byte); ok {
			h = murmur3.Sum32(x)
		}
	default:
		return 0, fmt.Errorf("bucket hash: type %s cannot be bucketed", t)
	}
	if !ok {
		return 0, fmt.Errorf("bucket hash: value %v (%T) is not a %s", v, v, t)
	}
	return int32(h), nil
}

// bucketOf drops the hash's sign bit so the remainder is never negative.
func bucketOf(h, n uint32) int32 { return int32((h & math.MaxInt32) % n) }

// hashLong is Murmur3 x86 32-bit with seed 0 of the 8 little-endian bytes of
// v, unrolled so the per-row loops of Evaluate need no byte slice.
func hashLong(v int64) uint32 {
	h := mixBlock(mixBlock(0, uint32(v)), uint32(uint64(v)>>32)) ^ 8 // 8: the length
	h = (h ^ h>>16) * 0x85ebca6b
	h = (h ^ h>>13) * 0xc2b2ae35
	return h ^ h>>16
}

func mixBlock(h, k uint32) uint32 {
	k *= 0xcc9e2d51
	k = bits.RotateLeft32(k, 15)
	k *= 0x1b873593
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

// decimalHashBytes writes the unscaled value as 16 big-endian two's complement
// bytes into buf and returns the shortest suffix that keeps the sign: the
// form of Java's BigInteger.toByteArray, which the spec's hash uses.
func decimalHashBytes(n decimal128.Num, buf *[16]byte) []byte {
	binary.BigEndian.PutUint64(buf[:8], uint64(n.HighBits()))
	binary.BigEndian.PutUint64(buf[8:], n.LowBits())
	b := buf[:]
	for len(b) > 1 && ((b[0] == 0x00 && b[1]&0x80 == 0) || (b[0] == 0xff && b[1]&0x80 != 0)) {
		b = b[1:]
	}
	return b
}

// truncateValue applies truncate[w] to a non-null canonical value whose type
// transformResult has accepted.
func truncateValue(w int, src iceberg.Type, v any) any {
	switch v := v.(type) {
	case int32:
		return truncateInt32(v, int32(w))
	case int64:
		return truncateInt64(v, int64(w))
	case decimal128.Num:
		return truncateDecimal(v, decimal128.FromI64(int64(w)))
	case string:
		return v[:truncatedLen(v, w)]
	case []byte:
		return clone(v[:min(len(v), w)])
	}
	panic(fmt.Sprintf("format: truncate of %T for type %s", v, src))
}

// truncateInt32 rounds v down to a multiple of w. The remainder is made
// non-negative so negative values round towards minus infinity, as the spec
// requires; a result below the type's minimum wraps, as in Java.
func truncateInt32(v, w int32) int32 {
	r := v % w
	if r < 0 {
		r += w
	}
	return v - r
}

func truncateInt64(v, w int64) int64 {
	r := v % w
	if r < 0 {
		r += w
	}
	return v - r
}

// truncateDecimal truncates the unscaled value: the width applies in units
// of the column's scale, so the scale is unchanged.
func truncateDecimal(v, w decimal128.Num) decimal128.Num {
	_, r := v.Div(w)
	if r.Sign() < 0 {
		r = r.Add(w)
	}
	return v.Sub(r)
}

// truncatedLen is the length in bytes of the first l code points of s. It
// steps from lead byte to lead byte by the sequence length that each lead
// byte announces, so it costs l steps rather than a pass over the bytes; for
// valid UTF-8 the cut never splits a sequence. In invalid input a stray
// continuation byte counts as one code point.
func truncatedLen[S string | []byte](s S, l int) int {
	if len(s) <= l {
		return len(s)
	}
	i := 0
	for range l {
		if i >= len(s) {
			return len(s)
		}
		i += utf8SequenceLen[s[i]>>4]
	}
	return min(i, len(s))
}

// utf8SequenceLen maps the high nibble of a UTF-8 lead byte to the length of
// its sequence.
var utf8SequenceLen = [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}

// Divisors of the date and time transforms.
const (
	microsPerHour = 3_600_000_000
	microsPerDay  = 24 * microsPerHour
	nanosPerHour  = 1000 * microsPerHour
	nanosPerDay   = 1000 * microsPerDay
)

// timeTransform applies year, month, day or hour to a non-null date or
// timestamp value whose type transformResult has accepted.
func timeTransform(fn string, src iceberg.Type, v any) any {
	if d, isDate := v.(int32); isDate {
		return dateTransform(fn, int64(d))
	}
	perHour, perDay := int64(microsPerHour), int64(microsPerDay)
	switch src.(type) {
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		perHour, perDay = nanosPerHour, nanosPerDay
	}
	ts := v.(int64)
	if fn == fnHour { // wraps, as Java's int cast does, beyond 245,000 years from 1970
		return int32(floorDiv(ts, perHour))
	}
	return dateTransform(fn, floorDiv(ts, perDay))
}

// dateTransform applies year, month or day to a count of days from
// 1970-01-01. Every date and timestamp gives a result that fits an int32.
func dateTransform(fn string, days int64) int32 {
	switch fn {
	case fnYear:
		y, _ := civilFromDays(days)
		return int32(y - 1970)
	case fnMonth:
		y, m := civilFromDays(days)
		return int32((y-1970)*12 + m - 1)
	}
	return int32(days)
}

// civilFromDays converts days from 1970-01-01 to a proleptic Gregorian year
// and month (1-12) with integer arithmetic only (the days-to-civil algorithm
// on 400-year eras), because time.Time is too slow for per-row loops.
func civilFromDays(days int64) (year, month int64) {
	z := days + 719468 // days from 0000-03-01
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // day of era [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of era [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of year from March 1 [0, 365]
	mp := (5*doy + 2) / 153                                // month from March [0, 11]
	year, month = yoe+era*400, mp+3
	if month > 12 {
		year, month = year+1, month-12
	}
	return year, month
}

// floorDiv divides rounding towards minus infinity; b must be positive.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
