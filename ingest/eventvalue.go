package ingest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/internal/jsonscan"
)

// timeUnit is the unit of a number that stands for a date, time or
// timestamp.
type timeUnit uint8

const (
	unitOwn    timeUnit = iota // the Iceberg type's own unit: days, µs, or ns for the _ns types
	unitDays                   // dates
	unitMillis                 // io.debezium.time.Time, Timestamp; Kafka Connect Time, Timestamp
	unitMicros                 // io.debezium.time.MicroTime, MicroTimestamp
	unitNanos                  // io.debezium.time.NanoTime, NanoTimestamp
)

// decimalMode is how a decimal is written.
type decimalMode uint8

const (
	// decPlain: a JSON number or a decimal string ("12.34"); the native form.
	decPlain decimalMode = iota
	// decBytes: base64 of the unscaled value, big-endian two's complement,
	// at colEncoding.scale (Debezium's precise mode).
	decBytes
	// decString: a decimal string (Debezium's string mode).
	decString
	// decDouble: a JSON number (Debezium's double mode), rounded half up to
	// the column's scale.
	decDouble
)

// colEncoding says how the JSON values of one column are written. Whatever
// it says, an object {"scale": s, "value": base64} is read as Debezium's
// VariableScaleDecimal, and the strings "NaN", "Infinity" and "-Infinity"
// as the special floating-point values.
type colEncoding struct {
	unit    timeUnit
	decimal decimalMode
	scale   int32 // writer's scale of decBytes; -1: the column's
}

var errOutOfRange = errors.New("out of range")

// convert reads one JSON value of a column of type t.
func (e colEncoding) convert(t iceberg.Type, s *jsonscan.Scanner, scratch *[]byte) (any, error) {
	kind := s.Peek()
	if kind == jsonscan.Null {
		return nil, s.Literal("null")
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		if kind != jsonscan.Bool {
			return nil, wantKind(kind, "a boolean")
		}
		if s.Data[s.Pos] == 't' {
			return true, s.Literal("true")
		}
		return false, s.Literal("false")
	case iceberg.Int32Type:
		v, err := integer(s, kind, math.MinInt32, math.MaxInt32)
		return int32(v), err
	case iceberg.Int64Type:
		return integer(s, kind, math.MinInt64, math.MaxInt64)
	case iceberg.Float32Type:
		f, err := float(s, kind, scratch)
		if err != nil {
			return nil, err
		}
		if f32 := float32(f); !math.IsInf(f, 0) && math.IsInf(float64(f32), 0) {
			return nil, fmt.Errorf("%g: %w for a float", f, errOutOfRange)
		}
		return float32(f), nil
	case iceberg.Float64Type:
		return float(s, kind, scratch)
	case iceberg.DecimalType:
		return e.decimalValue(t, s, kind, scratch)
	case iceberg.DateType:
		return e.date(s, kind, scratch)
	case iceberg.TimeType:
		return e.timeOfDay(s, kind, scratch)
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return e.timestamp(s, kind, scratch, unitMicros)
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return e.timestamp(s, kind, scratch, unitNanos)
	case iceberg.StringType:
		if kind != jsonscan.String {
			return nil, wantKind(kind, "a string")
		}
		v, sc, err := s.StringValue(*scratch)
		*scratch = sc
		return string(v), err
	case iceberg.UUIDType:
		str, err := stringOf(s, kind, scratch, "a uuid string")
		if err != nil {
			return nil, err
		}
		u, err := uuid.ParseBytes(str)
		if err != nil {
			return nil, fmt.Errorf("uuid %q: %w", str, err)
		}
		return u, nil
	case iceberg.FixedType:
		b, err := base64Value(s, kind, scratch)
		if err != nil {
			return nil, err
		}
		if len(b) != t.Len() {
			return nil, fmt.Errorf("%d bytes for %s", len(b), t)
		}
		return b, nil
	case iceberg.BinaryType:
		return base64Value(s, kind, scratch)
	}
	return nil, fmt.Errorf("type %s cannot be decoded from change events", t)
}

func wantKind(k jsonscan.Kind, what string) error {
	names := map[jsonscan.Kind]string{jsonscan.Bool: "a boolean", jsonscan.Number: "a number", jsonscan.String: "a string",
		jsonscan.Object: "an object", jsonscan.Array: "an array"}
	got := names[k]
	if got == "" {
		got = "no value"
	}
	return fmt.Errorf("want %s, got %s", what, got)
}

func stringOf(s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte, what string) ([]byte, error) {
	if kind != jsonscan.String {
		return nil, wantKind(kind, what)
	}
	v, sc, err := s.StringValue(*scratch)
	*scratch = sc
	return v, err
}

// integer reads an integral JSON number within [lo, hi]. A number written
// with a fraction or exponent is accepted when its value is integral (some
// JSON writers print every number as a double).
func integer(s *jsonscan.Scanner, kind jsonscan.Kind, lo, hi int64) (int64, error) {
	if kind != jsonscan.Number {
		return 0, wantKind(kind, "an integer")
	}
	num, err := s.Number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(num), 64)
		if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, fmt.Errorf("%s: not an integer in range", num)
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d: %w", v, errOutOfRange)
	}
	return v, nil
}

// float reads a JSON number, or one of the strings that Debezium's JSON
// converter writes for the values JSON lacks: "NaN", "Infinity", "-Infinity".
func float(s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte) (float64, error) {
	switch kind {
	case jsonscan.Number:
		num, err := s.Number()
		if err != nil {
			return 0, err
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", num, errOutOfRange)
		}
		return f, nil
	case jsonscan.String:
		str, err := stringOf(s, kind, scratch, "a number")
		if err != nil {
			return 0, err
		}
		switch string(str) {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, fmt.Errorf("%q is not a number (only NaN, Infinity and -Infinity may be strings)", str)
	}
	return 0, wantKind(kind, "a number")
}

func base64Value(s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte) ([]byte, error) {
	str, err := stringOf(s, kind, scratch, "a base64 string")
	if err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(str)))
	n, err := base64.StdEncoding.Decode(out, str)
	if err != nil {
		return nil, fmt.Errorf("base64: %w", err)
	}
	return out[:n], nil
}

// decimalValue reads a decimal in the encoding's mode, or a
// VariableScaleDecimal object in any mode.
func (e colEncoding) decimalValue(t iceberg.DecimalType, s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte) (any, error) {
	prec, scale := int32(t.Precision()), int32(t.Scale())
	var n decimal128.Num
	var err error
	switch {
	case kind == jsonscan.Object:
		n, err = variableScaleDecimal(s, scale, scratch)
	case kind == jsonscan.Number && (e.decimal == decPlain || e.decimal == decDouble):
		var num []byte
		if num, err = s.Number(); err != nil {
			return nil, err
		}
		if e.decimal == decDouble {
			n, err = roundedDecimal(num, scale)
		} else {
			n, err = exactDecimal(num, scale)
		}
	case kind == jsonscan.String && e.decimal == decBytes:
		var str []byte
		if str, err = stringOf(s, kind, scratch, "a base64 decimal"); err != nil {
			return nil, err
		}
		ws := e.scale
		if ws < 0 {
			ws = scale
		}
		n, err = unscaledDecimal(str, ws, scale)
	case kind == jsonscan.String:
		var str []byte
		if str, err = stringOf(s, kind, scratch, "a decimal string"); err != nil {
			return nil, err
		}
		n, err = exactDecimal(str, scale)
	default:
		return nil, wantKind(kind, "a decimal")
	}
	if err != nil {
		return nil, err
	}
	if !n.FitsInPrecision(prec) {
		return nil, fmt.Errorf("%s: %w for %s", n.ToString(scale), errOutOfRange, t)
	}
	return n, nil
}

// variableScaleDecimal reads {"scale": s, "value": base64} at scale.
func variableScaleDecimal(s *jsonscan.Scanner, scale int32, scratch *[]byte) (decimal128.Num, error) {
	var ws int64 = -1
	var raw []byte
	err := s.Object(func(key []byte, _ bool) error {
		switch string(key) {
		case "scale":
			v, err := integer(s, s.Peek(), 0, decimal128.MaxScale)
			ws = v
			return err
		case "value":
			v, err := stringOf(s, s.Peek(), scratch, "a base64 decimal")
			raw = v
			return err
		}
		_, err := s.Skip()
		return err
	})
	if err != nil {
		return decimal128.Num{}, err
	}
	if ws < 0 || raw == nil {
		return decimal128.Num{}, errors.New("variable-scale decimal needs scale and value")
	}
	return unscaledDecimal(raw, int32(ws), scale)
}

// unscaledDecimal decodes base64 big-endian two's complement bytes of an
// unscaled value at writer scale ws, rescaled exactly to scale.
func unscaledDecimal(b64 []byte, ws, scale int32) (decimal128.Num, error) {
	var buf [24]byte
	if base64.StdEncoding.DecodedLen(len(b64)) > len(buf) {
		return decimal128.Num{}, fmt.Errorf("decimal of %d base64 bytes: %w", len(b64), errOutOfRange)
	}
	n, err := base64.StdEncoding.Decode(buf[:], b64)
	if err != nil {
		return decimal128.Num{}, fmt.Errorf("decimal base64: %w", err)
	}
	if n == 0 {
		return decimal128.Num{}, errors.New("decimal with no bytes")
	}
	b := buf[:n]
	neg := b[0]&0x80 != 0
	// Bytes beyond 16 must be sign extension only.
	for len(b) > 16 {
		if (neg && b[0] != 0xFF) || (!neg && b[0] != 0) {
			return decimal128.Num{}, fmt.Errorf("decimal wider than 128 bits: %w", errOutOfRange)
		}
		b = b[1:]
	}
	var full [16]byte
	if neg {
		for i := range full {
			full[i] = 0xFF
		}
	}
	copy(full[16-len(b):], b)
	hi := int64(uint64(full[0])<<56 | uint64(full[1])<<48 | uint64(full[2])<<40 | uint64(full[3])<<32 |
		uint64(full[4])<<24 | uint64(full[5])<<16 | uint64(full[6])<<8 | uint64(full[7]))
	lo := uint64(full[8])<<56 | uint64(full[9])<<48 | uint64(full[10])<<40 | uint64(full[11])<<32 |
		uint64(full[12])<<24 | uint64(full[13])<<16 | uint64(full[14])<<8 | uint64(full[15])
	return rescale(decimal128.New(hi, lo), ws, scale)
}

func rescale(n decimal128.Num, from, to int32) (decimal128.Num, error) {
	if from < 0 || from > decimal128.MaxScale {
		return decimal128.Num{}, fmt.Errorf("decimal scale %d: %w", from, errOutOfRange)
	}
	out, err := n.Rescale(from, to)
	if err != nil {
		return decimal128.Num{}, fmt.Errorf("decimal %s does not fit scale %d exactly", n.ToString(from), to)
	}
	return out, nil
}

// exactDecimal reads a decimal string or JSON number at scale, refusing
// one that needs rounding.
func exactDecimal(str []byte, scale int32) (decimal128.Num, error) {
	if len(str) > 100 {
		return decimal128.Num{}, fmt.Errorf("decimal of %d characters: %w", len(str), errOutOfRange)
	}
	var r big.Rat
	if _, ok := r.SetString(string(str)); !ok {
		return decimal128.Num{}, fmt.Errorf("%q is not a decimal", str)
	}
	r.Mul(&r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() {
		return decimal128.Num{}, fmt.Errorf("decimal %s has more than %d decimal places", str, scale)
	}
	v := r.Num()
	if v.BitLen() > 127 {
		return decimal128.Num{}, fmt.Errorf("decimal %s: %w", str, errOutOfRange)
	}
	return decimal128.FromBigInt(v), nil
}

// roundedDecimal reads a JSON number of Debezium's double mode at scale:
// the double's shortest decimal form (as Java's BigDecimal.valueOf gives
// it) rounded half up, as a sink converting the double would.
func roundedDecimal(num []byte, scale int32) (decimal128.Num, error) {
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(f, 0) {
		return decimal128.Num{}, fmt.Errorf("%s: %w", num, errOutOfRange)
	}
	var r big.Rat
	r.SetString(strconv.FormatFloat(f, 'g', -1, 64))
	r.Mul(&r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	half := big.NewRat(1, 2)
	if r.Sign() < 0 {
		r.Sub(&r, half)
	} else {
		r.Add(&r, half)
	}
	v := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
	if v.BitLen() > 127 {
		return decimal128.Num{}, fmt.Errorf("%s: %w", num, errOutOfRange)
	}
	return decimal128.FromBigInt(v), nil
}

// date reads days since the epoch, or "YYYY-MM-DD".
func (e colEncoding) date(s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte) (any, error) {
	if kind == jsonscan.String {
		str, err := stringOf(s, kind, scratch, "a date")
		if err != nil {
			return nil, err
		}
		d, err := time.Parse(time.DateOnly, string(str))
		if err != nil {
			return nil, fmt.Errorf("date %q: %w", str, err)
		}
		return int32(d.Unix() / 86400), nil
	}
	v, err := integer(s, kind, math.MinInt32, math.MaxInt32)
	return int32(v), err
}

// perUnit is how many nanoseconds one unit holds.
func perUnit(u timeUnit) int64 {
	switch u {
	case unitDays:
		return 86400 * 1e9
	case unitMillis:
		return 1e6
	case unitMicros:
		return 1e3
	}
	return 1
}

// convertUnit turns v in unit from into unit to, flooring a finer value.
func convertUnit(v int64, from, to timeUnit) (int64, error) {
	f, t := perUnit(from), perUnit(to)
	if f >= t {
		m := f / t
		if v > math.MaxInt64/m || v < math.MinInt64/m {
			return 0, fmt.Errorf("%d: %w", v, errOutOfRange)
		}
		return v * m, nil
	}
	d := t / f
	q := v / d
	if v%d < 0 {
		q--
	}
	return q, nil
}

// timeOfDay reads microseconds from midnight: a number in the encoding's
// unit (micros by default), or "HH:MM:SS[.fffffffff]" with an optional zone
// (Debezium's ZonedTime), which is converted to UTC.
func (e colEncoding) timeOfDay(s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte) (any, error) {
	if kind == jsonscan.String {
		str, err := stringOf(s, kind, scratch, "a time")
		if err != nil {
			return nil, err
		}
		for _, layout := range []string{"15:04:05.999999999Z07:00", "15:04:05.999999999"} {
			if t, err := time.Parse(layout, string(str)); err == nil {
				t = t.UTC()
				return (int64(t.Hour())*3600+int64(t.Minute())*60+int64(t.Second()))*1e6 + int64(t.Nanosecond())/1e3, nil
			}
		}
		return nil, fmt.Errorf("time %q: want HH:MM:SS[.fraction][zone]", str)
	}
	v, err := integer(s, kind, math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	unit := e.unit
	if unit == unitOwn {
		unit = unitMicros
	}
	us, err := convertUnit(v, unit, unitMicros)
	if err != nil {
		return nil, err
	}
	if us < 0 || us >= 86400*1e6 {
		return nil, fmt.Errorf("time of day %d µs: %w", us, errOutOfRange)
	}
	return us, nil
}

// timestampLayouts are the ISO 8601 forms of a timestamp string: with a
// zone (Debezium's ZonedTimestamp), or without one, read as UTC.
var timestampLayouts = []string{
	time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999",
}

// timestamp reads an instant in unit want: a number in the encoding's unit
// (the type's own by default), or an ISO 8601 string.
func (e colEncoding) timestamp(s *jsonscan.Scanner, kind jsonscan.Kind, scratch *[]byte, want timeUnit) (any, error) {
	if kind == jsonscan.String {
		str, err := stringOf(s, kind, scratch, "a timestamp")
		if err != nil {
			return nil, err
		}
		for _, layout := range timestampLayouts {
			t, err := time.Parse(layout, string(str))
			if err != nil {
				continue
			}
			if want == unitNanos {
				if t.Year() < 1678 || t.Year() > 2261 {
					return nil, fmt.Errorf("timestamp %q: %w for nanoseconds", str, errOutOfRange)
				}
				return t.UnixNano(), nil
			}
			return t.UnixMicro(), nil
		}
		return nil, fmt.Errorf("timestamp %q: want ISO 8601 (2006-01-02T15:04:05.999999Z07:00)", str)
	}
	v, err := integer(s, kind, math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	unit := e.unit
	if unit == unitOwn {
		unit = want
	}
	return convertUnit(v, unit, want)
}
