package planner

import (
	"encoding/hex"
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
		v, err := strconv.ParseInt(lit.Text, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s is not a 32-bit integer", lit)
		}
		return int32(v), nil
	case iceberg.Int64Type:
		if lit.Kind != LitNumber {
			return nil, wrong("an integer")
		}
		v, err := strconv.ParseInt(lit.Text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not a 64-bit integer", lit)
		}
		return v, nil
	case iceberg.Float32Type:
		f, err := floatLiteral(lit, 32)
		if err != nil {
			return nil, err
		}
		return float32(f), nil
	case iceberg.Float64Type:
		return floatLiteral(lit, 64)
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

// floatLiteral reads a number, or one of the quoted words 'NaN',
// 'Infinity' and '-Infinity' (also 'inf', '+inf', '-NaN').
func floatLiteral(lit Literal, bits int) (float64, error) {
	switch lit.Kind {
	case LitNumber:
		f, err := strconv.ParseFloat(lit.Text, bits)
		if err != nil {
			return 0, fmt.Errorf("%s is not a %d-bit floating point number", lit, bits)
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
	return 0, fmt.Errorf("floating point column needs a number, 'NaN', 'Infinity' or '-Infinity', not %s", lit)
}

// decimalLiteral reads a number as an unscaled value of t's scale. More
// fractional digits than the scale would need rounding and are refused.
func decimalLiteral(t iceberg.DecimalType, lit Literal) (decimal128.Num, error) {
	r, ok := new(big.Rat).SetString(lit.Text)
	if !ok {
		return decimal128.Num{}, fmt.Errorf("%s is not a decimal number", lit)
	}
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale())), nil)))
	if !scaled.IsInt() {
		return decimal128.Num{}, fmt.Errorf("%s has more than %d decimal places, the scale of %s", lit, t.Scale(), t)
	}
	n := decimal128.FromBigInt(scaled.Num())
	if !n.FitsInPrecision(int32(t.Precision())) || n.BigInt().Cmp(scaled.Num()) != 0 {
		return decimal128.Num{}, fmt.Errorf("%s does not fit %s", lit, t)
	}
	return n, nil
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
