package planner

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// FuzzParse feeds arbitrary text to the predicate parser. It must never
// panic; a failure must be a *PredicateError whose position lies in the
// text (or just past it); and whatever parses must print (as --explain
// shows it) to a text that parses to the same predicate.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"order_id = 4242",
		"customer_id IN (7, 8) AND order_id < 1000",
		`"odd name" BETWEEN 'a' AND 'b''c'`,
		"ts >= '2026-11-01T00:00:00Z' AND x IS NOT NULL AND y IS NULL",
		"b = X'00ff' AND f = TRUE AND d = -1.5e-3 AND n = +.5",
		"a.b.c <= 'NaN'",
		"x = 1 OR y = 2",
		"x != 1",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text)
		if err != nil {
			var pe *PredicateError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %T %v, want a *PredicateError", text, err, err)
			}
			if pe.Pos < 0 || pe.Pos > len(text)+1 {
				t.Fatalf("Parse(%q): error position %d outside the text", text, pe.Pos)
			}
			_ = pe.Error()
			return
		}
		printed := p.String()
		again, err := Parse(printed)
		if err != nil {
			t.Fatalf("Parse(%q) printed as %q, which does not parse: %v", text, printed, err)
		}
		if len(again.Conds) != len(p.Conds) {
			t.Fatalf("Parse(%q) printed as %q: %d conditions, then %d", text, printed, len(p.Conds), len(again.Conds))
		}
		for i, c := range p.Conds {
			d := again.Conds[i]
			if c.Column != d.Column || c.Op != d.Op || len(c.Args) != len(d.Args) {
				t.Fatalf("Parse(%q) printed as %q: condition %d %+v became %+v", text, printed, i, c, d)
			}
			for j, a := range c.Args {
				if b := d.Args[j]; a.Kind != b.Kind || a.Text != b.Text {
					t.Fatalf("Parse(%q) printed as %q: literal %+v became %+v", text, printed, a, b)
				}
			}
		}
	})
}

// fuzzLiteralTypes are the column types a fuzz input picks from, one byte.
var fuzzLiteralTypes = []iceberg.Type{
	iceberg.PrimitiveTypes.Bool,
	iceberg.PrimitiveTypes.Int32,
	iceberg.PrimitiveTypes.Int64,
	iceberg.PrimitiveTypes.Float32,
	iceberg.PrimitiveTypes.Float64,
	iceberg.DecimalTypeOf(10, 2),
	iceberg.DecimalTypeOf(38, 0),
	iceberg.DecimalTypeOf(38, 38),
	iceberg.DecimalTypeOf(1, 0),
	iceberg.PrimitiveTypes.Date,
	iceberg.PrimitiveTypes.Time,
	iceberg.PrimitiveTypes.Timestamp,
	iceberg.PrimitiveTypes.TimestampTz,
	iceberg.PrimitiveTypes.TimestampNs,
	iceberg.PrimitiveTypes.TimestampTzNs,
	iceberg.PrimitiveTypes.String,
	iceberg.PrimitiveTypes.UUID,
	iceberg.FixedTypeOf(3),
	iceberg.PrimitiveTypes.Binary,
}

// FuzzLiteralValue converts arbitrary literals to every column type. It must
// never panic; a value it returns must be the canonical Go value of the type
// (what the key encoding and comparisons expect); and a decimal must be
// exactly the number written, within the type's precision.
func FuzzLiteralValue(f *testing.F) {
	for _, s := range []struct {
		typ  byte
		kind LiteralKind
		text string
	}{
		{5, LitNumber, "1e38"},
		{5, LitNumber, "-14.20"},
		{6, LitNumber, "99999999999999999999999999999999999999"},
		{7, LitNumber, "0.1e-36"},
		{4, LitNumber, "1e400"},
		{3, LitNumber, "1e-46"},
		{2, LitNumber, "-9223372036854775808"},
		{13, LitString, "2262-04-11T23:47:16.854775807Z"},
		{12, LitString, "2026-11-01 02:00:00+02:00"},
		{10, LitString, "23:59:59.999999"},
		{16, LitString, "f79c3e09-677c-4bbd-a479-3f349cb785e7"},
		{17, LitBytes, "00ff01"},
		{4, LitString, "-Infinity"},
		{0, LitBool, "true"},
	} {
		f.Add(s.typ, byte(s.kind), s.text)
	}
	f.Fuzz(func(t *testing.T, typ, kind byte, text string) {
		ct := fuzzLiteralTypes[int(typ)%len(fuzzLiteralTypes)]
		lit := Literal{Kind: LiteralKind(kind % 4), Text: text, Pos: 1}
		v, err := literalValue(ct, lit)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%s %s: empty error", ct, lit)
			}
			return
		}
		if err := format.CheckValue(ct, v); err != nil || v == nil {
			t.Fatalf("%s %s = %v (%T): not a canonical value: %v", ct, lit, v, v, err)
		}
		dt, ok := ct.(iceberg.DecimalType)
		if !ok {
			return
		}
		n := v.(decimal128.Num)
		if !n.FitsInPrecision(int32(dt.Precision())) {
			t.Fatalf("%s %s = %s: beyond the precision", ct, lit, n.ToString(int32(dt.Scale())))
		}
		// Check the value against big.Rat where that stays cheap.
		if _, exp, found := strings.Cut(strings.ToLower(text), "e"); found && len(exp) > 4 {
			return
		}
		want, ok := new(big.Rat).SetString(text)
		if !ok {
			t.Fatalf("%s %s accepted, but it is not a number", ct, lit)
		}
		got := new(big.Rat).SetFrac(n.BigInt(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dt.Scale())), nil))
		if got.Cmp(want) != 0 {
			t.Fatalf("%s %s = %s, want %s", ct, lit, got.FloatString(dt.Scale()), want.FloatString(dt.Scale()))
		}
	})
}
