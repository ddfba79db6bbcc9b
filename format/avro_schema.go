package format

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"
)

// The Avro schemas of tracking files: how an Iceberg schema becomes an Avro
// record schema with field-id attributes (as the table spec maps types for
// manifests), and how the schema a file carries is compiled into a decoder
// that matches fields by field-id.

// Avro schema JSON, field order kept as written.
type avroRecordJSON struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Fields []avroFieldJSON `json:"fields"`
}

type avroFieldJSON struct {
	Name    string          `json:"name"`
	Type    any             `json:"type"`
	Default json.RawMessage `json:"default,omitempty"`
	FieldID int             `json:"field-id"`
}

// avroRecordOf maps Iceberg fields to an Avro record the way the table spec
// does: optional fields are ["null", T] unions defaulting to null, every
// field carries its ID as "field-id", nested records are named "r<id>".
// named records the named types already defined, which later uses must
// reference by name.
func avroRecordOf(name string, fields []iceberg.NestedField, named map[string]bool) avroRecordJSON {
	rec := avroRecordJSON{Type: "record", Name: name, Fields: []avroFieldJSON{}}
	for _, f := range fields {
		af := avroFieldJSON{Name: f.Name, Type: avroTypeOf(f.Type, f.ID, named), FieldID: f.ID}
		if !f.Required {
			af.Type = []any{"null", af.Type}
			af.Default = json.RawMessage("null")
		}
		rec.Fields = append(rec.Fields, af)
	}
	return rec
}

func avroTypeOf(t iceberg.Type, id int, named map[string]bool) any {
	switch t := t.(type) {
	case *iceberg.StructType:
		return avroRecordOf(fmt.Sprintf("r%d", id), t.FieldList, named)
	case iceberg.BooleanType:
		return "boolean"
	case iceberg.Int32Type:
		return "int"
	case iceberg.Int64Type:
		return "long"
	case iceberg.Float32Type:
		return "float"
	case iceberg.Float64Type:
		return "double"
	case iceberg.DateType:
		return map[string]any{"type": "int", "logicalType": "date"}
	case iceberg.TimeType:
		return map[string]any{"type": "long", "logicalType": "time-micros"}
	case iceberg.TimestampType:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": false}
	case iceberg.TimestampTzType:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": true}
	case iceberg.TimestampNsType:
		return map[string]any{"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": false}
	case iceberg.TimestampTzNsType:
		return map[string]any{"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": true}
	case iceberg.StringType:
		return "string"
	case iceberg.BinaryType:
		return "bytes"
	case iceberg.UUIDType:
		return avroFixedOf("uuid_fixed", 16, named, "logicalType", "uuid")
	case iceberg.FixedType:
		return avroFixedOf(fmt.Sprintf("fixed_%d", t.Len()), t.Len(), named)
	case iceberg.DecimalType:
		return avroFixedOf(fmt.Sprintf("decimal_%d_%d", t.Precision(), t.Scale()), decimalBytes(t.Precision()), named,
			"logicalType", "decimal", "precision", t.Precision(), "scale", t.Scale())
	}
	// trackingSchema holds primitive types and structs only.
	panic(fmt.Sprintf("format: no Avro type for %s", t))
}

// avroFixedOf defines a named fixed type on first use and references it by
// name afterwards, as Avro requires.
func avroFixedOf(name string, size int, named map[string]bool, props ...any) any {
	if named[name] {
		return name
	}
	named[name] = true
	m := map[string]any{"type": "fixed", "name": name, "size": size}
	for i := 0; i+1 < len(props); i += 2 {
		m[props[i].(string)] = props[i+1]
	}
	return m
}

// decimalSizes[p] is the fewest bytes whose two's complement holds every
// unscaled value of precision p, the size the table spec gives decimal(p, s).
var decimalSizes = func() (sizes [39]int) {
	pow10, limit := big.NewInt(1), new(big.Int)
	for p := range sizes {
		n := 1
		for limit.Lsh(big.NewInt(1), uint(8*n-1)); limit.Cmp(pow10) < 0; limit.Lsh(big.NewInt(1), uint(8*n-1)) {
			n++
		}
		sizes[p] = n
		pow10.Mul(pow10, big.NewInt(10))
	}
	return sizes
}()

func decimalBytes(precision int) int { return decimalSizes[precision] }

// derefAvro resolves a named reference to the type it names.
func derefAvro(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroFieldID reads a field's "field-id" attribute.
func avroFieldID(f *avro.Field) (int, bool) {
	v, ok := f.Prop("field-id").(float64)
	if !ok || v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

// avroLogical returns the logicalType attribute of s, known to hamba/avro
// or not.
func avroLogical(s avro.Schema) string {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return string(ls.Logical().Type())
	}
	if ps, ok := s.(avro.PropertySchema); ok {
		if v, ok := ps.Prop("logicalType").(string); ok {
			return v
		}
	}
	return ""
}

type avroDecodeFunc func(c *avroCursor) any

// compileAvro builds a decoder that reads values written with schema ws as
// values of Iceberg type t: a struct becomes a map of the fields whose
// field-id t knows, other fields are skipped. ws may be t's type or a union
// of null and it; Avro's promotions of int to long and float to double are
// allowed.
func compileAvro(ws avro.Schema, t iceberg.Type, path string) (avroDecodeFunc, error) {
	ws = derefAvro(ws)
	if u, ok := ws.(*avro.UnionSchema); ok {
		types := u.Types()
		if len(types) != 2 || (types[0].Type() == avro.Null) == (types[1].Type() == avro.Null) {
			return nil, fmt.Errorf("%s: union %s is not an optional %s", path, u, t)
		}
		nullBranch := int64(0)
		if types[1].Type() == avro.Null {
			nullBranch = 1
		}
		inner, err := compileAvro(types[1-nullBranch], t, path)
		if err != nil {
			return nil, err
		}
		return func(c *avroCursor) any {
			switch branch := c.long(); {
			case c.err != nil || branch == nullBranch:
				return nil
			case branch == 1-nullBranch:
				return inner(c)
			default:
				c.fail("%s: union branch %d does not exist", path, branch)
				return nil
			}
		}, nil
	}
	if st, ok := t.(*iceberg.StructType); ok {
		return compileAvroRecord(ws, st, path)
	}
	if err := checkAvroPrimitive(ws, t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return avroPrimitiveDecoder(ws, t), nil
}

func compileAvroRecord(ws avro.Schema, st *iceberg.StructType, path string) (avroDecodeFunc, error) {
	rs, ok := ws.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not a record", path, ws.Type())
	}
	want := map[int]iceberg.NestedField{}
	for _, f := range st.FieldList {
		want[f.ID] = f
	}
	type fieldStep struct {
		id     int
		decode avroDecodeFunc // nil: skip a value of type skip
		skip   avro.Schema
	}
	var steps []fieldStep
	seen := map[int]bool{}
	for _, af := range rs.Fields() {
		id, hasID := avroFieldID(af)
		if hasID && seen[id] {
			return nil, fmt.Errorf("%s: field-id %d appears twice", path, id)
		}
		if hasID {
			seen[id] = true
		}
		f, known := want[id]
		if !hasID || !known {
			steps = append(steps, fieldStep{skip: af.Type()})
			continue
		}
		dec, err := compileAvro(af.Type(), f.Type, fmt.Sprintf("%s.%s (%d)", path, f.Name, id))
		if err != nil {
			return nil, err
		}
		steps = append(steps, fieldStep{id: id, decode: dec})
	}
	return func(c *avroCursor) any {
		m := make(map[int]any, len(steps))
		for _, s := range steps {
			if s.decode == nil {
				skipAvro(c, s.skip, 0)
			} else {
				m[s.id] = s.decode(c)
			}
			if c.err != nil {
				return nil
			}
		}
		return m
	}, nil
}

// checkAvroPrimitive checks that values written with ws can be read as t:
// the same Avro type (or a promotion: int to long, float to double, a
// narrower decimal of the same scale), the same fixed size, and no
// contradicting logical type.
func checkAvroPrimitive(ws avro.Schema, t iceberg.Type) error {
	kind, logical := ws.Type(), avroLogical(ws)
	logicalIs := func(want string) bool { return logical == "" || logical == want }
	ok := false
	switch t := t.(type) {
	case iceberg.BooleanType:
		ok = kind == avro.Boolean && logical == ""
	case iceberg.Int32Type:
		ok = kind == avro.Int && logical == ""
	case iceberg.Int64Type:
		ok = (kind == avro.Long || kind == avro.Int) && logical == ""
	case iceberg.Float32Type:
		ok = kind == avro.Float && logical == ""
	case iceberg.Float64Type:
		ok = (kind == avro.Double || kind == avro.Float) && logical == ""
	case iceberg.DateType:
		ok = kind == avro.Int && logicalIs("date")
	case iceberg.TimeType:
		ok = kind == avro.Long && logicalIs("time-micros")
	case iceberg.TimestampType, iceberg.TimestampTzType:
		ok = kind == avro.Long && logicalIs("timestamp-micros") && adjustToUTCIs(ws, t.Equals(iceberg.PrimitiveTypes.TimestampTz))
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		ok = kind == avro.Long && logicalIs("timestamp-nanos") && adjustToUTCIs(ws, t.Equals(iceberg.PrimitiveTypes.TimestampTzNs))
	case iceberg.StringType:
		ok = kind == avro.String
	case iceberg.BinaryType:
		ok = kind == avro.Bytes && logical == ""
	case iceberg.UUIDType:
		ok = kind == avro.Fixed && ws.(*avro.FixedSchema).Size() == 16 && logicalIs("uuid")
	case iceberg.FixedType:
		ok = kind == avro.Fixed && ws.(*avro.FixedSchema).Size() == t.Len() && logical == ""
	case iceberg.DecimalType:
		if fs, isFixed := ws.(*avro.FixedSchema); isFixed && fs.Size() <= 16 {
			d, isDecimal := fs.Logical().(*avro.DecimalLogicalSchema)
			// A decimal widened at the same scale, as the table spec's
			// promotion allows, reads as the wider type.
			ok = isDecimal && d.Precision() <= t.Precision() && d.Scale() == t.Scale()
		}
	}
	if !ok {
		return fmt.Errorf("Avro type %s cannot be read as %s", ws, t)
	}
	return nil
}

// adjustToUTCIs reports whether ws's adjust-to-utc attribute, when present,
// says utc.
func adjustToUTCIs(ws avro.Schema, utc bool) bool {
	ps, ok := ws.(avro.PropertySchema)
	if !ok {
		return true
	}
	v, present := ps.Prop("adjust-to-utc").(bool)
	return !present || v == utc
}
