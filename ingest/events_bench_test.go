package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// benchDecode decodes event and computes its entry mutations for md over
// schema, b.N times: the work per event of one decoding core.
func benchDecode(b *testing.B, schema *iceberg.Schema, md *format.Metadata, event []byte) {
	is, err := format.NewIndexSchema(md, schema)
	if err != nil {
		b.Fatal(err)
	}
	rc, err := NewRowColumns(schema, is.SourceFieldIDs())
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewChangeDecoder(rc, DebeziumOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ee, err := NewEventEntries(is, rc)
	if err != nil {
		b.Fatal(err)
	}
	var ev ChangeEvent
	var muts []EventMutation
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(event, &ev); err != nil {
			b.Fatal(err)
		}
		if muts, err = ee.Mutations(muts[:0], &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeDebezium1KB decodes a Debezium JSON event of about 1 KB
// (schemas disabled, 24 columns of which the index reads two) and computes
// its entry mutation.
func BenchmarkDecodeDebezium1KB(b *testing.B) {
	fields := []iceberg.NestedField{
		{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64},
	}
	var row strings.Builder
	row.WriteString(`{"id":123456,"customer_id":4242`)
	for i := range 22 {
		fields = append(fields, iceberg.NestedField{ID: 3 + i, Name: fmt.Sprintf("c%d", i), Type: iceberg.PrimitiveTypes.String})
		fmt.Fprintf(&row, `,"c%d":"value %d of a column the index never reads"`, i, i)
	}
	row.WriteString("}")
	event := []byte(`{"before":null,"after":` + row.String() + `,"source":{"version":"2.7.0.Final","connector":"postgresql","name":"shop",` +
		`"ts_ms":1764400000000,"db":"shop","schema":"public","table":"orders","txId":1234,"lsn":56789},"op":"c","ts_ms":1764400000123}`)
	benchDecode(b, iceberg.NewSchema(0, fields...), &format.Metadata{IdentityFields: []int{2, 1}, ClusterSpec: []int{2, 1}}, event)
}

// BenchmarkDecodeDebeziumOrder decodes the event of streamidx bench's
// events figure: an order of about 400 bytes, Debezium JSON as PostgreSQL's
// connector writes it, for a secondary index on the customer that carries
// the total.
func BenchmarkDecodeDebeziumOrder(b *testing.B) {
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 3, Name: "status", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 4, Name: "total_cents", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 5, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 6, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
	event := []byte(`{"before":null,"after":{"order_id":123456,"customer_id":4242,"status":"placed","total_cents":31337,` +
		`"ts":1700123456000000,"note":"order 123456 for customer 4242"},"source":{"version":"2.7.0.Final","connector":"postgresql",` +
		`"name":"shop","ts_ms":1764400000000,"snapshot":"false","db":"shop","schema":"public","table":"orders","txId":12345,` +
		`"lsn":7901184},"op":"c","ts_ms":1764400000123,"transaction":null}`)
	md := &format.Metadata{
		IdentityFields:     []int{2, 1},
		MaterializedFields: []format.ExprField{{FieldID: 4, DataType: iceberg.PrimitiveTypes.Int64, Expr: format.Ref{ID: 4}}},
		NonMaterializedFields: []format.ExprField{{FieldID: 900000, DataType: iceberg.PrimitiveTypes.Int32,
			Expr: format.NewApply("bucket", format.IntLit(16), format.Ref{ID: 2})}},
		ClusterSpec: []int{900000, 2, 1},
	}
	benchDecode(b, schema, md, event)
}
