package ingest

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
)

// eventSchema has a column of every primitive type and a struct.
func eventSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "score", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: 4, Name: "f", Type: iceberg.PrimitiveTypes.Float32},
		iceberg.NestedField{ID: 5, Name: "flag", Type: iceberg.PrimitiveTypes.Bool},
		iceberg.NestedField{ID: 6, Name: "i", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 7, Name: "amount", Type: iceberg.DecimalTypeOf(10, 2)},
		iceberg.NestedField{ID: 8, Name: "d", Type: iceberg.PrimitiveTypes.Date},
		iceberg.NestedField{ID: 9, Name: "t", Type: iceberg.PrimitiveTypes.Time},
		iceberg.NestedField{ID: 10, Name: "ts", Type: iceberg.PrimitiveTypes.Timestamp},
		iceberg.NestedField{ID: 11, Name: "tstz", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 12, Name: "tsns", Type: iceberg.PrimitiveTypes.TimestampNs},
		iceberg.NestedField{ID: 13, Name: "u", Type: iceberg.PrimitiveTypes.UUID},
		iceberg.NestedField{ID: 14, Name: "b", Type: iceberg.PrimitiveTypes.Binary},
		iceberg.NestedField{ID: 15, Name: "fx", Type: iceberg.FixedTypeOf(4)},
		iceberg.NestedField{ID: 16, Name: "addr", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 17, Name: "city", Type: iceberg.PrimitiveTypes.String},
			{ID: 18, Name: "zip", Type: iceberg.PrimitiveTypes.Int32},
		}}},
		iceberg.NestedField{ID: 19, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

var allColumns = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18}

func newDecoder(t testing.TB, ids []int, opts DebeziumOptions) *ChangeDecoder {
	t.Helper()
	rc, err := NewRowColumns(eventSchema(), ids)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewChangeDecoder(rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// value returns the decoded value of field id in row.
func value(t *testing.T, d *ChangeDecoder, row *Row, id int) any {
	t.Helper()
	slot, ok := d.Columns().Slot(id)
	if !ok {
		t.Fatalf("field %d not decoded", id)
	}
	return row.Values[slot]
}

const fullRow = `{"id": 7, "name": "ada\u00e9\"x", "score": "NaN", "f": 1.5, "flag": true, "i": -3,
 "amount": "AQI=", "d": 20393, "t": 3723000001, "ts": 1764400000000001, "tstz": "2026-11-29T08:06:40.000001+01:00",
 "tsns": 1764400000000000001, "u": "f79c3e09-677c-4bbd-a479-3f349cb785e7", "b": "AAEC", "fx": "AAECAw==",
 "addr": {"city": "Kraków", "zip": 30001}, "note": "skipped \\ unread"}`

func TestDebeziumWithoutSchema(t *testing.T) {
	d := newDecoder(t, allColumns, DebeziumOptions{})
	var ev ChangeEvent
	msg := `{"before": null, "after": ` + fullRow + `, "source": {"db": "x", "table": "orders"}, "op": "c", "ts_ms": 1}`
	if err := d.Decode([]byte(msg), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Op != OpInsert {
		t.Fatalf("op %s, want insert", ev.Op)
	}
	want := map[int]any{
		1: int64(7), 2: "adaé\"x", 4: float32(1.5), 5: true, 6: int32(-3),
		7:  decimal128.FromI64(258), // 0x0102 unscaled at scale 2
		8:  int32(20393),
		9:  int64(3723000001),
		10: int64(1764400000000001),
		11: time.Date(2026, 11, 29, 7, 6, 40, 1000, time.UTC).UnixMicro(),
		12: int64(1764400000000000001),
		13: uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
		17: "Kraków", 18: int32(30001),
	}
	for id, w := range want {
		if got := value(t, d, &ev.After, id); got != w {
			t.Errorf("field %d = %#v, want %#v", id, got, w)
		}
	}
	if got := value(t, d, &ev.After, 3).(float64); !math.IsNaN(got) {
		t.Errorf("score = %v, want NaN", got)
	}
	if got := value(t, d, &ev.After, 14).([]byte); string(got) != "\x00\x01\x02" {
		t.Errorf("b = %x", got)
	}
	if got := value(t, d, &ev.After, 15).([]byte); string(got) != "\x00\x01\x02\x03" {
		t.Errorf("fx = %x", got)
	}
}

// debeziumSchema is the envelope schema Debezium's JSON converter writes for
// a row of id, amount (Decimal, scale 3), d (Date), t (Time, millis), ts
// (Timestamp, millis), tstz (ZonedTimestamp), tsns (NanoTimestamp), score.
const debeziumSchema = `{"type":"struct","fields":[
 {"type":"struct","fields":[
  {"type":"int64","optional":false,"field":"id"},
  {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"3","connect.decimal.precision":"10"},"field":"amount"},
  {"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1,"field":"d"},
  {"type":"int32","optional":true,"name":"io.debezium.time.Time","version":1,"field":"t"},
  {"type":"int64","optional":true,"name":"io.debezium.time.Timestamp","version":1,"field":"ts"},
  {"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"tstz"},
  {"type":"int64","optional":true,"name":"io.debezium.time.NanoTimestamp","version":1,"field":"tsns"},
  {"type":"double","optional":true,"field":"score"}],
  "optional":true,"name":"srv.public.orders.Value","field":"before"},
 {"type":"struct","fields":[
  {"type":"int64","optional":false,"field":"id"},
  {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"3","connect.decimal.precision":"10"},"field":"amount"},
  {"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1,"field":"d"},
  {"type":"int32","optional":true,"name":"io.debezium.time.Time","version":1,"field":"t"},
  {"type":"int64","optional":true,"name":"io.debezium.time.Timestamp","version":1,"field":"ts"},
  {"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"tstz"},
  {"type":"int64","optional":true,"name":"io.debezium.time.NanoTimestamp","version":1,"field":"tsns"},
  {"type":"double","optional":true,"field":"score"}],
  "optional":true,"name":"srv.public.orders.Value","field":"after"},
 {"type":"string","optional":false,"field":"op"}],
 "optional":false,"name":"srv.public.orders.Envelope"}`

func TestDebeziumWithSchema(t *testing.T) {
	d := newDecoder(t, []int{1, 3, 7, 8, 9, 10, 11, 12}, DebeziumOptions{})
	var ev ChangeEvent
	before := `{"id": 1, "amount": "JxA=", "d": 1, "t": 1500, "ts": 1764400000123, "tstz": "2026-11-29T07:06:40Z", "tsns": 1764400000000000999, "score": "-Infinity"}`
	after := `{"id": 2, "amount": "/Bg=", "d": -1, "t": 0, "ts": 0, "tstz": "1970-01-01T00:00:00.5-00:30", "tsns": -1, "score": "Infinity"}`
	msg := `{"schema": ` + debeziumSchema + `, "payload": {"before": ` + before + `, "after": ` + after + `, "op": "u"}}`
	for range 2 { // the second time from the cached schema
		if err := d.Decode([]byte(msg), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Op != OpUpdate {
			t.Fatalf("op %s", ev.Op)
		}
		if got := value(t, d, &ev.Before, 7); got != decimal128.FromI64(1000) {
			t.Errorf("decimal 10.000 at scale 3 = %v, want 10.00", got)
		}
		if got := value(t, d, &ev.After, 7); got != decimal128.FromI64(-100) {
			t.Errorf("decimal -1.000 at scale 3 = %v, want -1.00", got)
		}
		if got := value(t, d, &ev.Before, 8); got != int32(1) {
			t.Errorf("date = %v", got)
		}
		if got := value(t, d, &ev.Before, 9); got != int64(1_500_000) {
			t.Errorf("time from millis = %v", got)
		}
		if got := value(t, d, &ev.Before, 10); got != int64(1764400000123_000) {
			t.Errorf("timestamp from millis = %v", got)
		}
		if got := value(t, d, &ev.Before, 12); got != int64(1764400000000000999) {
			t.Errorf("timestamp_ns from nanos = %v", got)
		}
		if got := value(t, d, &ev.After, 11); got != int64(500_000+30*60*1_000_000) {
			t.Errorf("zoned timestamp = %v", got)
		}
		if got := value(t, d, &ev.After, 3).(float64); !math.IsInf(got, 1) {
			t.Errorf("score = %v", got)
		}
		if got := value(t, d, &ev.Before, 3).(float64); !math.IsInf(got, -1) {
			t.Errorf("score = %v", got)
		}
	}
}

func TestDebeziumDecimalModes(t *testing.T) {
	cases := []struct {
		name, mode, json string
		want             int64 // unscaled at scale 2
		err              string
	}{
		{"precise", "precise", `"AQI="`, 258, ""},
		{"precise negative", "precise", `"/w=="`, -1, ""},
		{"string", "string", `"-12.30"`, -1230, ""},
		{"string too fine", "string", `"1.234"`, 0, "decimal places"},
		{"double", "double", `12.345`, 1235, ""},
		{"variable scale", "precise", `{"scale": 3, "value": "MDk="}`, 0, "scale 2 exactly"},
		{"variable scale exact", "precise", `{"scale": 1, "value": "AQ=="}`, 10, ""},
		{"too wide", "string", `"123456789.00"`, 0, "out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDecoder(t, []int{1, 7}, DebeziumOptions{DecimalHandling: c.mode})
			var ev ChangeEvent
			err := d.Decode([]byte(`{"op":"c","after":{"id":1,"amount":`+c.json+`}}`), &ev)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := value(t, d, &ev.After, 7); got != decimal128.FromI64(c.want) {
				t.Errorf("amount = %v, want %d", got, c.want)
			}
		})
	}
	// Decimal bytes at the schema's scale of 3: 0x3039 = 12.345 does not fit
	// the column's scale 2 exactly; 0x04D2 = 1.234 neither; 0x2710 = 10.000 does.
	d := newDecoder(t, []int{1, 3, 7, 8, 9, 10, 11, 12}, DebeziumOptions{})
	var ev ChangeEvent
	row := `{"id": 1, "amount": "JxA=", "d": 1, "t": 1, "ts": 1, "tstz": null, "tsns": 1, "score": 1}`
	if err := d.Decode([]byte(`{"schema":`+debeziumSchema+`,"payload":{"op":"c","after":`+row+`}}`), &ev); err != nil {
		t.Fatal(err)
	}
	if got := value(t, d, &ev.After, 7); got != decimal128.FromI64(1000) {
		t.Errorf("amount from scale 3 = %v, want 10.00", got)
	}
}

func TestDebeziumOps(t *testing.T) {
	d := newDecoder(t, []int{1, 2}, DebeziumOptions{})
	var ev ChangeEvent
	cases := []struct {
		msg string
		op  EventOp
		err string
	}{
		{`{"op":"r","after":{"id":1,"name":"a"}}`, OpInsert, ""},
		{`{"op":"d","before":{"id":1,"name":"a"},"after":null}`, OpDelete, ""},
		{`{"op":"u","before":{"id":1},"after":{"id":1,"name":"b"}}`, 0, "lacks column name"},
		{`{"op":"u","before":null,"after":{"id":1,"name":"b"}}`, 0, "without a before image"},
		{`{"op":"d","before":null}`, 0, "without a before image"},
		{`{"op":"t"}`, 0, "truncate"},
		{`{"op":"x","after":{}}`, 0, `op "x"`},
		{`{"op":"c","after":{"id":1,"name":"a","extra":1}}`, 0, "not in the table schema"},
		{`{"op":"c","after":{"id":null,"name":"a"}}`, 0, "required but null"},
		{`{"op":"c","after":{"id":1,"name":5}}`, 0, "want a string"},
		{`{"op":"c","after":{"id":1.5,"name":"a"}}`, 0, "not an integer"},
		{`{"op":"c","after":{"id":1,"name":"a"}`, 0, "malformed JSON"},
		{`{"schema":{},"payload":null}`, 0, "tombstone"},
		{``, 0, "tombstone"},
	}
	for _, c := range cases {
		err := d.Decode([]byte(c.msg), &ev)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.msg, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.msg, err)
			continue
		}
		if ev.Op != c.op {
			t.Errorf("%s: op %s, want %s", c.msg, ev.Op, c.op)
		}
	}
	if err := d.Decode(nil, &ev); !errors.Is(err, ErrTombstone) {
		t.Errorf("nil value: %v, want ErrTombstone", err)
	}
	if err := d.Decode([]byte(`{"op":"c","after":{"id":1,"name":"a","zzz":1}}`), &ev); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("unknown column: %v, want ErrUnknownColumn", err)
	}
}

// TestDebeziumImagesDecodedInPassing: the images are decoded as the event
// is read, and that changes nothing a record means: an image the op does not
// need may be anything, the last of repeated members counts, and an image
// that fails still lets the rest of the record be checked.
func TestDebeziumImagesDecodedInPassing(t *testing.T) {
	d := newDecoder(t, []int{1, 2}, DebeziumOptions{})
	var ev ChangeEvent
	for msg, want := range map[string]string{
		`{"op":"c","before":{"id":1},"after":{"id":2,"name":"b"}}`:                              "",
		`{"before":{"id":1,"name":"a","zzz":0},"op":"c","after":{"id":2,"name":"b"}}`:           "",
		`{"after":{"id":1},"after":{"id":2,"name":"b"},"op":"c"}`:                               "",
		`{"after":{"id":1,"name":"a"},"op":"c","after":{"id":2}}`:                               "after: row image lacks column name",
		`{"op":"d","before":{"id":2,"name":"b"},"after":{"id":1}}`:                              "",
		`{"op":"u","before":{"id":2,"name":"b"},"after":{"id":2,"name":"b"},"before":{"id":2}}`: "before image is not full enough",
		`{"op":"c","after":{"id":1,"name":5},"source":{"x":}}`:                                  "malformed JSON",
		`{"op":"c","after":{"id":1,"name":"a"},"after":null}`:                                   "without an after image",
	} {
		err := d.Decode([]byte(msg), &ev)
		if want != "" {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err %v, want %q", msg, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", msg, err)
			continue
		}
		row := &ev.After
		if ev.Op == OpDelete {
			row = &ev.Before
		}
		if id, name := value(t, d, row, 1), value(t, d, row, 2); id != int64(2) || name != "b" {
			t.Errorf("%s: row id %v name %v, want 2 and b", msg, id, name)
		}
	}
}

func TestNative(t *testing.T) {
	d := newDecoder(t, []int{1, 2, 7, 11, 17}, DebeziumOptions{})
	var ev ChangeEvent
	msg := `{"op":"upsert","table":"sales.orders","row":{"id":2,"name":"b","amount":"1.50","tstz":"2026-01-02T03:04:05Z","addr.city":"x"},
		"before":{"id":1,"name":"a","amount":3,"tstz":1,"addr":{"city":null}}}`
	if err := d.Decode([]byte(msg), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Op != OpUpdate || ev.Table != "sales.orders" {
		t.Fatalf("op %s table %q", ev.Op, ev.Table)
	}
	if got := value(t, d, &ev.After, 7); got != decimal128.FromI64(150) {
		t.Errorf("amount %v", got)
	}
	if got := value(t, d, &ev.Before, 7); got != decimal128.FromI64(300) {
		t.Errorf("amount %v", got)
	}
	if got := value(t, d, &ev.After, 17); got != "x" {
		t.Errorf("dotted key: %v", got)
	}
	if got := value(t, d, &ev.Before, 17); got != nil {
		t.Errorf("null city: %v", got)
	}
	if PeekTable([]byte(msg)) != "sales.orders" {
		t.Error("PeekTable")
	}
	for msg, want := range map[string]string{
		`{"op":"upsert","row":{"id":1,"name":"a","amount":1,"tstz":1,"addr":null}}`:         "",
		`{"op":"delete","row":{"id":1,"name":"a","amount":1,"tstz":1,"addr":{"city":"q"}}}`: "",
		`{"op":"insert","row":{}}`:                 `op "insert"`,
		`{"op":"upsert","row":{"id":1},"extra":1}`: `unknown member "extra"`,
		`{"op":"delete","row":{"id":1,"name":"a","amount":1,"tstz":1,"addr":null},"before":{}}`:          "before is for upserts",
		`{"op":"upsert","row":{"id":1,"name":"a","amount":1,"tstz":1,"addr":{"city":"q","street":"s"}}}`: "addr.street",
	} {
		err := d.Decode([]byte(msg), &ev)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: err %v, want %q", msg, err, want)
		}
	}
}

func TestEventEntries(t *testing.T) {
	schema := eventSchema()
	md := &format.Metadata{
		IdentityFields: []int{2, 1},
		MaterializedFields: []format.ExprField{{FieldID: 900000, DataType: iceberg.PrimitiveTypes.Int32,
			Expr: format.NewApply("bucket", format.IntLit(4), format.Ref{ID: 1})}},
		NonMaterializedFields: []format.ExprField{{FieldID: 900001, DataType: iceberg.PrimitiveTypes.String,
			Expr: format.NewApply("truncate", format.IntLit(1), format.Ref{ID: 2})}},
		ClusterSpec: []int{900001, 2, 1},
	}
	is, err := format.NewIndexSchema(md, schema)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := NewRowColumns(schema, is.SourceFieldIDs())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewChangeDecoder(rc, DebeziumOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ee, err := NewEventEntries(is, rc)
	if err != nil {
		t.Fatal(err)
	}
	var ev ChangeEvent
	if err := d.Decode([]byte(`{"op":"u","before":{"id":34,"name":"grace","note":"x"},"after":{"id":34,"name":"ada"}}`), &ev); err != nil {
		t.Fatal(err)
	}
	muts, err := ee.Mutations(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) != 2 || muts[0].Count != -1 || muts[1].Count != 1 || muts[0].Seq != 0 || muts[1].Seq != 1 {
		t.Fatalf("mutations %+v", muts)
	}
	codec := format.NewEntryCodec(is)
	old, err := codec.DecodeValue(muts[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	bucket, _ := format.TransformValue("bucket", 4, iceberg.PrimitiveTypes.Int64, int64(34))
	if old[0] != "grace" || old[1] != int64(34) || old[2] != bucket || old[3] != "g" {
		t.Errorf("old entry %v", old)
	}
	nw, _ := codec.DecodeValue(muts[1].Value)
	if nw[0] != "ada" || nw[3] != "a" {
		t.Errorf("new entry %v", nw)
	}
	// The key is the staging key of the entry: cluster fields first.
	want, _ := codec.AppendKey(nil, nw)
	if string(want) != string(muts[1].Key) {
		t.Errorf("key %x, want %x", muts[1].Key, want)
	}

	// An index over a metadata column cannot be fed from events.
	if _, err := NewRowColumns(schema, []int{format.FieldIDFile}); err == nil {
		t.Error("NewRowColumns accepted _file")
	}
}

// TestDebeziumTimeEncodings: every time and timestamp encoding a Debezium
// connector writes, named by the record's schema (the PostgreSQL and MySQL
// connectors write MicroTime and MicroTimestamp by default), becomes the
// Iceberg column's unit: microseconds, or nanoseconds for timestamp_ns,
// finer units floored.
func TestDebeziumTimeEncodings(t *testing.T) {
	cases := []struct {
		field, typ, name, json string
		id                     int
		want                   int64
	}{
		{"t", "int32", "io.debezium.time.Time", `3723001`, 9, 3_723_001_000},
		{"t", "int64", "io.debezium.time.MicroTime", `3723000001`, 9, 3_723_000_001},
		{"t", "int64", "io.debezium.time.NanoTime", `3723000001999`, 9, 3_723_000_001},
		{"t", "string", "io.debezium.time.ZonedTime", `"01:02:03.000001+01:00"`, 9, 123_000_001},
		{"t", "int32", "org.apache.kafka.connect.data.Time", `1`, 9, 1_000},
		{"ts", "int64", "io.debezium.time.Timestamp", `1764400000123`, 10, 1_764_400_000_123_000},
		{"ts", "int64", "io.debezium.time.MicroTimestamp", `1764400000000001`, 10, 1_764_400_000_000_001},
		{"ts", "int64", "io.debezium.time.MicroTimestamp", `-1`, 10, -1},
		{"ts", "int64", "io.debezium.time.NanoTimestamp", `-1`, 10, -1},
		{"ts", "int64", "org.apache.kafka.connect.data.Timestamp", `2`, 10, 2_000},
		{"tstz", "string", "io.debezium.time.ZonedTimestamp", `"2025-11-29T08:06:40.000001+01:00"`, 11, 1_764_400_000_000_001},
		{"tstz", "int64", "io.debezium.time.MicroTimestamp", `1764400000000001`, 11, 1_764_400_000_000_001},
		{"tsns", "int64", "io.debezium.time.MicroTimestamp", `1764400000000001`, 12, 1_764_400_000_000_001_000},
		{"tsns", "int64", "io.debezium.time.Timestamp", `5`, 12, 5_000_000},
	}
	for _, c := range cases {
		t.Run(c.name[strings.LastIndex(c.name, ".")+1:]+"-"+c.field, func(t *testing.T) {
			image := `{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},` +
				`{"type":"` + c.typ + `","optional":true,"name":"` + c.name + `","version":1,"field":"` + c.field + `"}],"optional":true,"field":"%s"}`
			schema := `{"type":"struct","fields":[` + strings.ReplaceAll(image, "%s", "before") + `,` + strings.ReplaceAll(image, "%s", "after") +
				`,{"type":"string","optional":false,"field":"op"}],"optional":false,"name":"srv.public.x.Envelope"}`
			msg := `{"schema":` + schema + `,"payload":{"op":"c","before":null,"after":{"id":1,"` + c.field + `":` + c.json + `}}}`
			d := newDecoder(t, []int{1, c.id}, DebeziumOptions{})
			var ev ChangeEvent
			if err := d.Decode([]byte(msg), &ev); err != nil {
				t.Fatal(err)
			}
			if got := value(t, d, &ev.After, c.id); got != c.want {
				t.Errorf("%s %s = %v, want %d", c.name, c.json, got, c.want)
			}
		})
	}
}
