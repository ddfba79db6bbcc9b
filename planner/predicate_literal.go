package planner

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// literalValue converts a literal to the canonical Go value (see
// format.Key) of the column type t it is compared with. It refuses
// literals that would need rounding, so a condition never means something
// other than what was written.
func literalValue(t iceberg.Type, lit Literal) (any, error) {
	wrong := func(want string) error {
		return fmt.Errorf("%s column needs %s, not %s", t, want, lit)
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		if lit.Kind != LitBool {
			return nil, wrong("TRUE or FALSE")
		}
		return lit.Text == "true", nil
	case iceberg.Int32Type:
		if lit.Kind != LitNumber {
			return nil, wrong("an integer")
		}
		v, err := intLiteral(t, lit, 32)
		return int32(v), err
	case iceberg.Int64Type:
		if lit.Kind != LitNumber {
			return nil, wrong("an integer")
		}
		return intLiteral(t, lit, 64)
	case iceberg.Float32Type:
		f, err := floatLiteral(t, lit, 32)
		if err != nil {
			return nil, err
		}
		return float32(f), nil
	case iceberg.Float64Type:
		return floatLiteral(t, lit, 64)
	case iceberg.DecimalType:
		if lit.Kind != LitNumber {
			return nil, wrong("a number")
		}
		return decimalLiteral(t, lit)
	case iceberg.DateType:
		if lit.Kind != LitString {
			return nil, wrong("a quoted date such as '2026-11-01'")
		}
		d, err := time.Parse("2006-01-02", lit.Text)
		if err != nil {
			return nil, fmt.Errorf("%s is not a date YYYY-MM-DD", lit)
		}
		return int32(d.Unix() / 86400), nil
	case iceberg.TimeType:
		if lit.Kind != LitString {
			return nil, wrong("a quoted time such as '13:45:00'")
		}
		d, err := time.Parse("15:04:05.999999", lit.Text)
		if err != nil {
			return nil, fmt.Errorf("%s is not a time HH:MM:SS[.ffffff]", lit)
		}
		return int64(d.Hour())*3_600_000_000 + int64(d.Minute())*60_000_000 + int64(d.Second())*1_000_000 + int64(d.Nanosecond()/1000), nil
	case iceberg.TimestampType, iceberg.TimestampTzType:
		ts, err := timestampLiteral(t, lit)
		if err != nil {
			return nil, err
		}
		if ts.Nanosecond()%1000 != 0 {
			return nil, fmt.Errorf("%s has nanoseconds; %s holds microseconds", lit, t)
		}
		return ts.UnixMicro(), nil
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		ts, err := timestampLiteral(t, lit)
		if err != nil {
			return nil, err
		}
		if ts.Before(minNanoTimestamp) || ts.After(maxNanoTimestamp) {
			return nil, fmt.Errorf("%s is out of range for %s, which holds %s to %s", lit, t,
				minNanoTimestamp.Format(time.RFC3339Nano), maxNanoTimestamp.Format(time.RFC3339Nano))
		}
		return ts.UnixNano(), nil
	case iceberg.StringType:
		if lit.Kind != LitString {
			return nil, wrong("a quoted string")
		}
		return lit.Text, nil
	case iceberg.UUIDType:
		if lit.Kind != LitString {
			return nil, wrong("a quoted UUID")
		}
		u, err := uuid.Parse(lit.Text)
		if err != nil {
			return nil, fmt.Errorf("%s is not a UUID", lit)
		}
		return u, nil
	case iceberg.BinaryType, iceberg.FixedType:
		if lit.Kind != LitBytes {
			return nil, wrong("a bytes literal such as X'00ff'")
		}
		b, err := hex.DecodeString(lit.Text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lit, err)
		}
		if f, ok := t.(iceberg.FixedType); ok && len(b) != f.Len() {
			return nil, fmt.Errorf("%s has %d bytes, %s needs %d", lit, len(b), t, f.Len())
		}
		return b, nil
	}
	return nil, fmt.Errorf("columns of type %s cannot be compared", t)
}

// The instants a nanosecond timestamp (a signed 64-bit count of nanoseconds
// since the epoch) can hold.
var (
	minNanoTimestamp = time.Unix(0, math.MinInt64).UTC()
	maxNanoTimestamp = time.Unix(0, math.MaxInt64).UTC()
)

// intLiteral reads an integer of the given bit size; a number with a
// fraction or an exponent is not one, even when its value is whole.
func intLiteral(t iceberg.Type, lit Literal, bits int) (int64, error) {
	v, err := strconv.ParseInt(lit.Text, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is out of range for %s (%d-bit)", lit, t, bits)
	}
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer, which %s needs", lit, t)
	}
	return v, nil
}

// floatLiteral reads a number, or one of the quoted words 'NaN',
// 'Infinity' and '-Infinity' (also 'inf', '+inf', '-NaN'). A number is
// rounded to the nearest value of the type, as SQL does, but one beyond the
// type's range, or so small that it would read as zero, is refused: the
// condition would then mean something else than what was written.
func floatLiteral(t iceberg.Type, lit Literal, bits int) (float64, error) {
	switch lit.Kind {
	case LitNumber:
		f, err := strconv.ParseFloat(lit.Text, bits)
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s is out of range for %s (%d-bit floating point)", lit, t, bits)
		}
		if err != nil {
			return 0, fmt.Errorf("%s is not a number, which %s needs", lit, t)
		}
		if f == 0 && strings.ContainsAny(mantissa(lit.Text), "123456789") {
			return 0, fmt.Errorf("%s is too small for %s (%d-bit floating point): it would read as 0", lit, t, bits)
		}
		return f, nil
	case LitString:
		switch strings.ToLower(lit.Text) {
		case "nan", "+nan":
			return math.NaN(), nil
		case "-nan":
			return math.Copysign(math.NaN(), -1), nil
		case "infinity", "+infinity", "inf", "+inf":
			return math.Inf(1), nil
		case "-infinity", "-inf":
			return math.Inf(-1), nil
		}
	}
	return 0, fmt.Errorf("%s column needs a number, 'NaN', 'Infinity' or '-Infinity', not %s", t, lit)
}

// mantissa is a number's text before its exponent.
func mantissa(text string) string {
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		return text[:i]
	}
	return text
}

// decimalLiteral reads a number as an unscaled value of t's scale. More
// fractional digits than the scale would need rounding and are refused, as
// are values beyond t's precision. It works on the digits of the text, so an
// exponent such as 1e999999999 costs nothing.
func decimalLiteral(t iceberg.DecimalType, lit Literal) (decimal128.Num, error) {
	notNumber := fmt.Errorf("%s is not a decimal number, which %s needs", lit, t)
	text := lit.Text
	neg := false
	if text != "" && (text[0] == '-' || text[0] == '+') {
		neg = text[0] == '-'
		text = text[1:]
	}
	mant, exp, hasExp := strings.Cut(text, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(text, "E")
	}
	whole, frac, _ := strings.Cut(mant, ".")
	if whole+frac == "" || !allDigits(whole) || !allDigits(frac) || (hasExp && !isExponent(exp)) {
		return decimal128.Num{}, notNumber
	}
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return decimal128.Num{}, nil // zero, whatever the exponent
	}
	var e int64
	if hasExp {
		// Beyond ±bound the outcome no longer depends on the exponent's
		// size (too many digits, or too many decimal places), so clamping
		// keeps the arithmetic below in range.
		bound := int64(len(lit.Text)) + 64
		v, err := strconv.ParseInt(exp, 10, 64)
		switch {
		case (err != nil && strings.HasPrefix(exp, "-")) || v < -bound:
			v = -bound
		case err != nil || v > bound:
			v = bound
		}
		e = v
	}
	// value = digits · 10^(e - len(frac)), so the unscaled value of scale s
	// is digits · 10^shift.
	shift := e - int64(len(frac)) + int64(t.Scale())
	trimmed := strings.TrimRight(digits, "0")
	shift += int64(len(digits) - len(trimmed))
	digits = trimmed
	if shift < 0 {
		return decimal128.Num{}, fmt.Errorf("%s has more than %d decimal places, the scale of %s", lit, t.Scale(), t)
	}
	if int64(len(digits))+shift > int64(t.Precision()) {
		return decimal128.Num{}, fmt.Errorf("%s does not fit %s: it has more than %d digits", lit, t, t.Precision())
	}
	n, ok := new(big.Int).SetString(digits+strings.Repeat("0", int(shift)), 10)
	if !ok {
		return decimal128.Num{}, notNumber
	}
	if neg {
		n.Neg(n)
	}
	return decimal128.FromBigInt(n), nil
}

func allDigits(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// isExponent accepts an optionally signed, non-empty run of digits.
func isExponent(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	return s != "" && allDigits(s)
}

// timestampLayouts are the ISO 8601 forms accepted for timestamps. A
// timestamp without a zone is read as UTC; a date alone is its midnight.
var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

func timestampLiteral(t iceberg.Type, lit Literal) (time.Time, error) {
	if lit.Kind != LitString {
		return time.Time{}, fmt.Errorf("%s column needs a quoted ISO 8601 timestamp such as '2026-11-01T00:00:00Z', not %s", t, lit)
	}
	for _, layout := range timestampLayouts {
		if ts, err := time.Parse(layout, lit.Text); err == nil {
			return ts.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s is not an ISO 8601 timestamp such as '2026-11-01T00:00:00Z'", lit)
}
