package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

// BenchmarkDecodeDebezium1KB decodes a Debezium JSON event of about 1 KB
// (schemas disabled, 24 columns of which the index reads two) and computes
// its entry mutation: the work per event of one decoding core.
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
	schema := iceberg.NewSchema(0, fields...)
	event := []byte(`{"before":null,"after":` + row.String() + `,"source":{"version":"2.7.0.Final","connector":"postgresql","name":"shop",` +
		`"ts_ms":1764400000000,"db":"shop","schema":"public","table":"orders","txId":1234,"lsn":56789},"op":"c","ts_ms":1764400000123}`)
	md := &format.Metadata{IdentityFields: []int{2, 1}, ClusterSpec: []int{2, 1}}
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
