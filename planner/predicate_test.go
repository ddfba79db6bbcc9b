package planner

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"customer_id = 42", "customer_id = 42"},
		{"  customer_id=42  ", "customer_id = 42"},
		{"customer_id IN (1, 2,3)", "customer_id IN (1, 2, 3)"},
		{"ts >= '2026-11-01T00:00:00Z' and ts < '2026-11-02T00:00:00Z'", "ts >= '2026-11-01T00:00:00Z' AND ts < '2026-11-02T00:00:00Z'"},
		{"name BETWEEN 'a' AND 'b'", "name BETWEEN 'a' AND 'b'"},
		{"score is null", "score IS NULL"},
		{"score IS NOT NULL", "score IS NOT NULL"},
		{"name = 'it''s'", "name = 'it''s'"},
		{`"odd col" <= -1.5e3`, `"odd col" <= -1.5e3`},
		{"a.b > X'00FF' AND flag = true", "a.b > X'00ff' AND flag = TRUE"},
		{"x = 'ł'", "x = 'ł'"},
		{"", ""},
	}
	for _, tc := range cases {
		p, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := p.String(); got != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in   string
		pos  int
		want string
	}{
		{"customer_id = ", 15, "expected a literal, found the end"},
		{"customer_id 42", 13, "expected an operator"},
		{"customer_id = 1 OR customer_id = 2", 17, "OR is not supported"},
		{"customer_id != 1", 13, "operator != is not supported"},
		{"customer_id = NULL", 15, "IS NULL"},
		{"name = 'abc", 8, "not closed"},
		{"name = abc", 8, "quote strings"},
		{"id IN (1, 2", 12, "expected , or )"},
		{"id IN 1", 7, "expected ( after IN"},
		{"id BETWEEN 1 2", 14, "expected AND in BETWEEN"},
		{"id IS 3", 7, "expected NULL after IS"},
		{"id = 1 id = 2", 8, "expected AND or the end"},
		{"= 1", 1, "expected a column name"},
		{"id = 1 AND", 11, "expected a column name, found the end"},
		{"b = X'0'", 5, "even number of hexadecimal digits"},
		{"id = 1 ; drop", 8, `unexpected ';'`},
		{"name LIKE 'a%'", 6, "LIKE is not supported"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.in)
		var pe *PredicateError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q): %v, want a *PredicateError", tc.in, err)
			continue
		}
		if pe.Pos != tc.pos || !strings.Contains(pe.Msg, tc.want) {
			t.Errorf("Parse(%q): position %d %q, want position %d with %q", tc.in, pe.Pos, pe.Msg, tc.pos, tc.want)
		}
		if !strings.Contains(err.Error(), "position") {
			t.Errorf("Parse(%q): error %q does not say where", tc.in, err)
		}
	}
}

func TestLiteralValue(t *testing.T) {
	str := func(s string) Literal { return Literal{Kind: LitString, Text: s} }
	num := func(s string) Literal { return Literal{Kind: LitNumber, Text: s} }
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	cases := []struct {
		typ  iceberg.Type
		lit  Literal
		want any
		err  string
	}{
		{iceberg.PrimitiveTypes.Int32, num("42"), int32(42), ""},
		{iceberg.PrimitiveTypes.Int32, num("3000000000"), nil, "out of range for int"},
		{iceberg.PrimitiveTypes.Int64, num("1.5"), nil, "not an integer"},
		{iceberg.PrimitiveTypes.Int64, str("42"), nil, "needs an integer"},
		{iceberg.PrimitiveTypes.Float64, num("-2.5e1"), -25.0, ""},
		{iceberg.PrimitiveTypes.Float64, str("-Infinity"), math.Inf(-1), ""},
		{iceberg.PrimitiveTypes.Float32, num("1.5"), float32(1.5), ""},
		{iceberg.DecimalTypeOf(10, 2), num("14.2"), decimal128.FromI64(1420), ""},
		{iceberg.DecimalTypeOf(10, 2), num("-0.05"), decimal128.FromI64(-5), ""},
		{iceberg.DecimalTypeOf(10, 2), num("1.234"), nil, "more than 2 decimal places"},
		{iceberg.DecimalTypeOf(4, 2), num("123.45"), nil, "does not fit"},
		{iceberg.PrimitiveTypes.Date, str("2026-11-02"), int32(20759), ""},
		{iceberg.PrimitiveTypes.Date, str("2026-13-02"), nil, "not a date"},
		{iceberg.PrimitiveTypes.Time, str("01:02:03.5"), int64(3723500000), ""},
		{iceberg.PrimitiveTypes.TimestampTz, str("2026-11-01T02:00:00+02:00"), ts("2026-11-01T00:00:00Z"), ""},
		{iceberg.PrimitiveTypes.TimestampTz, str("2026-11-01"), ts("2026-11-01T00:00:00Z"), ""},
		{iceberg.PrimitiveTypes.Timestamp, str("2026-11-01 00:00:00.000001"), ts("2026-11-01T00:00:00.000001Z"), ""},
		{iceberg.PrimitiveTypes.Timestamp, str("2026-11-01T00:00:00.000000001"), nil, "has nanoseconds"},
		{iceberg.PrimitiveTypes.TimestampNs, str("2026-11-01T00:00:00.000000001Z"), ts("2026-11-01T00:00:00Z")*1000 + 1, ""},
		{iceberg.PrimitiveTypes.TimestampTz, num("1"), nil, "ISO 8601"},
		{iceberg.PrimitiveTypes.String, num("1"), nil, "quoted string"},
		{iceberg.PrimitiveTypes.UUID, str(u.String()), u, ""},
		{iceberg.PrimitiveTypes.Binary, Literal{Kind: LitBytes, Text: "00ff"}, []byte{0, 0xff}, ""},
		{iceberg.FixedTypeOf(3), Literal{Kind: LitBytes, Text: "00ff"}, nil, "needs 3"},
		{iceberg.PrimitiveTypes.Bool, Literal{Kind: LitBool, Text: "true"}, true, ""},
	}
	for _, tc := range cases {
		got, err := literalValue(tc.typ, tc.lit)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %s: error %v, want %q", tc.typ, tc.lit, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s %s: %v", tc.typ, tc.lit, err)
		default:
			if b, ok := tc.want.([]byte); ok {
				if string(got.([]byte)) != string(b) {
					t.Errorf("%s %s = %v, want %v", tc.typ, tc.lit, got, tc.want)
				}
			} else if got != tc.want {
				t.Errorf("%s %s = %v (%T), want %v (%T)", tc.typ, tc.lit, got, got, tc.want, tc.want)
			}
		}
	}
}

func TestLiteralOutOfRange(t *testing.T) {
	num := func(s string) Literal { return Literal{Kind: LitNumber, Text: s} }
	str := func(s string) Literal { return Literal{Kind: LitString, Text: s} }
	cases := []struct {
		typ  iceberg.Type
		lit  Literal
		want string // in the error, besides the type
	}{
		{iceberg.DecimalTypeOf(10, 2), num("1e38"), "does not fit"},
		{iceberg.DecimalTypeOf(10, 2), num("-1e38"), "does not fit"},
		{iceberg.DecimalTypeOf(38, 10), num("1e30"), "does not fit"},
		{iceberg.DecimalTypeOf(38, 0), num("1e38"), "does not fit"},
		{iceberg.DecimalTypeOf(10, 2), num("1e999999999"), "does not fit"},
		{iceberg.DecimalTypeOf(10, 2), num("1e99999999999999999999"), "does not fit"},
		{iceberg.DecimalTypeOf(10, 2), num("1e-999999999"), "decimal places"},
		{iceberg.DecimalTypeOf(10, 2), num("1e-99999999999999999999"), "decimal places"},
		{iceberg.PrimitiveTypes.Int32, num("3000000000"), "out of range"},
		{iceberg.PrimitiveTypes.Int64, num("9223372036854775808"), "out of range"},
		{iceberg.PrimitiveTypes.Int64, num("1e3"), "not an integer"},
		{iceberg.PrimitiveTypes.Float64, num("1e400"), "out of range"},
		{iceberg.PrimitiveTypes.Float64, num("-1e400"), "out of range"},
		{iceberg.PrimitiveTypes.Float64, num("1e-400"), "too small"},
		{iceberg.PrimitiveTypes.Float32, num("1e39"), "out of range"},
		{iceberg.PrimitiveTypes.Float32, num("1e-46"), "too small"},
		{iceberg.PrimitiveTypes.TimestampNs, str("2300-01-01T00:00:00Z"), "out of range"},
		{iceberg.PrimitiveTypes.TimestampTzNs, str("1600-01-01"), "out of range"},
		{iceberg.PrimitiveTypes.Date, str("10000-01-01"), "not a date"},
		{iceberg.PrimitiveTypes.Time, str("24:00:00"), "not a time"},
		{iceberg.FixedTypeOf(2), Literal{Kind: LitBytes, Text: "00"}, "needs 2"},
	}
	for _, tc := range cases {
		got, err := literalValue(tc.typ, tc.lit)
		if err == nil {
			t.Errorf("%s %s = %v, want an error", tc.typ, tc.lit, got)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.typ.String()) {
			t.Errorf("%s %s: error %q, want one naming the type and saying %q", tc.typ, tc.lit, err, tc.want)
		}
	}
	// The extremes that do fit are accepted, and zero has no magnitude.
	for _, tc := range []struct {
		typ iceberg.Type
		lit Literal
	}{
		{iceberg.DecimalTypeOf(38, 0), num("99999999999999999999999999999999999999")},
		{iceberg.DecimalTypeOf(38, 2), num("-999999999999999999999999999999999999.99")},
		{iceberg.DecimalTypeOf(10, 2), num("0e999999999999999999999")},
		{iceberg.DecimalTypeOf(10, 2), num("12.3400000000000000000000000000000000000000")},
		{iceberg.PrimitiveTypes.Float64, num("0e-400")},
		{iceberg.PrimitiveTypes.Int64, num("-9223372036854775808")},
		{iceberg.PrimitiveTypes.TimestampNs, str("2262-04-11T23:47:16.854775807Z")},
	} {
		if _, err := literalValue(tc.typ, tc.lit); err != nil {
			t.Errorf("%s %s: %v", tc.typ, tc.lit, err)
		}
	}
}
