package indexdef

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

func ordersSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 3, Name: "total_cents", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 4, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 5, Name: "address", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 6, Name: "city", Type: iceberg.PrimitiveTypes.String},
		}}},
		iceberg.NestedField{ID: 7, Name: "odd name", Type: iceberg.PrimitiveTypes.String},
	)
}

const issueExample = `
name: by_customer
identity: [customer_id, order_id]          # source columns, dotted names for nested fields
materialized: [_file, _pos, total_cents]   # column names, metadata columns, or expressions
non-materialized: ["bucket(16, customer_id)"]
cluster: ["bucket(16, customer_id)", customer_id, order_id]
properties: {}
`

func TestResolveTheDocumentedExample(t *testing.T) {
	d, err := Parse([]byte(issueExample))
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Resolve(ordersSchema(), "tbl-uuid", "file:///warehouse/orders/indexes/by_customer")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.IdentityFields; len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("identity %v", got)
	}
	wantMat := []string{`{"type":"reference","id":2147483646}`, `{"type":"reference","id":2147483645}`, `{"type":"reference","id":3}`}
	for i, f := range m.MaterializedFields {
		b, _ := format.MarshalExpr(f.Expr)
		if string(b) != wantMat[i] {
			t.Errorf("materialized %d: %s, want %s", i, b, wantMat[i])
		}
		if f.FieldID != FirstExprFieldID+i {
			t.Errorf("materialized %d has id %d", i, f.FieldID)
		}
	}
	if !m.MaterializedFields[0].DataType.Equals(iceberg.PrimitiveTypes.String) || !m.MaterializedFields[1].DataType.Equals(iceberg.PrimitiveTypes.Int64) {
		t.Errorf("_file/_pos types: %s %s", m.MaterializedFields[0].DataType, m.MaterializedFields[1].DataType)
	}
	bucket := m.NonMaterializedFields[0]
	b, _ := format.MarshalExpr(bucket.Expr)
	if string(b) != `{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["bucket"]},"arguments":[16,{"type":"reference","id":1}]}` || !bucket.DataType.Equals(iceberg.PrimitiveTypes.Int32) {
		t.Errorf("bucket field: %s %s", b, bucket.DataType)
	}
	if want := []int{bucket.FieldID, 1, 2}; len(m.ClusterSpec) != 3 || m.ClusterSpec[0] != want[0] || m.ClusterSpec[1] != 1 || m.ClusterSpec[2] != 2 {
		t.Errorf("cluster spec %v, want %v", m.ClusterSpec, want)
	}
	if m.Properties[PropName] != "by_customer" || m.Type != format.TypeScalar || m.TableUUID != "tbl-uuid" {
		t.Errorf("metadata: %+v", m)
	}
	// The result is a valid metadata file.
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := format.ParseMetadata(data); err != nil {
		t.Fatal(err)
	}
}

func TestClusterOnlyExpressionBecomesNonMaterialized(t *testing.T) {
	d, err := Parse([]byte(`{"name":"by_day","identity":["ts","address.city"],"cluster":["day(ts)","truncate(3, address.city)"]}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Resolve(ordersSchema(), "u", "s3://b/i")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.NonMaterializedFields) != 2 || !m.NonMaterializedFields[0].DataType.Equals(iceberg.PrimitiveTypes.Date) ||
		!m.NonMaterializedFields[1].DataType.Equals(iceberg.PrimitiveTypes.String) {
		t.Fatalf("non-materialized: %+v", m.NonMaterializedFields)
	}
	if m.IdentityFields[1] != 6 {
		t.Errorf("nested identity resolved to %d", m.IdentityFields[1])
	}
}

func TestDefinitionErrors(t *testing.T) {
	cases := map[string]string{
		`{"name":"x","identity":["nope"],"cluster":["nope"]}`:                                              `no column "nope"`,
		`{"name":"x","identity":["customer_id"],"cluster":["bucket(16, total_cents)"]}`:                    "identity",
		`{"name":"x","identity":["customer_id"],"cluster":["day(customer_id)"]}`:                           "day",
		`{"name":"x","identity":["customer_id"],"cluster":["bucket(16, customer_id"]}`:                     "not closed",
		`{"name":"x","identity":["customer_id"],"materialized":["_deleted"],"cluster":["customer_id"]}`:    `no column "_deleted"`,
		`{"name":"x","identity":["customer_id"],"materialized":["_pos","_pos"],"cluster":["customer_id"]}`: "declared twice",
		`{"name":"bad name","identity":["customer_id"],"cluster":["customer_id"]}`:                         "name",
		`{"name":"x","identity":["customer_id"],"cluster":["customer_id"],"clsuter":[]}`:                   "clsuter",
		`{"name":"x","identity":["customer_id"],"materialized":["_partition"],"cluster":["customer_id"]}`:  "does not compute the partition struct",
		`{"name":"x","identity":["customer_id"],"cluster":["bucket(4, _partition)","customer_id"]}`:        "does not compute the partition struct",
	}
	for in, want := range cases {
		d, err := Parse([]byte(in))
		if err == nil {
			_, err = d.Resolve(ordersSchema(), "u", "file:///i")
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want error containing %q, got %v", in, want, err)
		}
	}
	d, _ := Parse([]byte(`{"name":"x","identity":["customer_id"],"cluster":["bucket(16, total_cents)"]}`))
	if _, err := d.Resolve(ordersSchema(), "u", "file:///i"); !errors.Is(err, format.ErrClusterSource) {
		t.Errorf("cluster expression over a non-identity column: want ErrClusterSource, got %v", err)
	}
}

func TestParseExprQuotedAndNested(t *testing.T) {
	e, err := ParseExpr("truncate(2, \"odd name\")", ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	if refs := format.Refs(e); len(refs) != 1 || refs[0] != 7 {
		t.Errorf("quoted name: %v", refs)
	}
	e, err = ParseExpr("bucket(4, truncate(3, address.city))", ordersSchema())
	if err != nil || e.String() != "bucket(4, truncate(3, ref(6)))" {
		t.Errorf("nested call: %v %v", e, err)
	}
}

// TestSourceEvents: source: events is kept as an index property, and an
// index that stores anything change events do not carry is refused with
// the reason.
func TestSourceEvents(t *testing.T) {
	d, err := Parse([]byte("name: by_city\nsource: events\nidentity: [address.city, order_id]\nmaterialized: [total_cents]\ncluster: [\"truncate(2, address.city)\", address.city, order_id]\n"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := d.Resolve(ordersSchema(), "u", "file:///i")
	if err != nil {
		t.Fatal(err)
	}
	if !EventsFed(md) || md.Properties[PropSource] != SourceEvents {
		t.Errorf("properties %v", md.Properties)
	}
	for _, field := range []string{"_file", "_pos", "_spec_id", "_row_id", "_last_updated_sequence_number"} {
		d, err := Parse([]byte(`{"name":"x","source":"events","identity":["order_id"],"materialized":["` + field + `"],"cluster":["order_id"]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Resolve(ordersSchema(), "u", "file:///i")
		if err == nil || !strings.Contains(err.Error(), "source: events cannot feed "+field) || !strings.Contains(err.Error(), "not where the row") {
			t.Errorf("%s: %v", field, err)
		}
	}
	d, _ = Parse([]byte(`{"name":"x","source":"kafka","identity":["order_id"],"cluster":["order_id"]}`))
	if _, err := d.Resolve(ordersSchema(), "u", "file:///i"); err == nil || !strings.Contains(err.Error(), "want table or events") {
		t.Errorf("source kafka: %v", err)
	}
	d, _ = Parse([]byte(`{"name":"x","identity":["order_id"],"materialized":["_file","_pos"],"cluster":["order_id"]}`))
	md, err = d.Resolve(ordersSchema(), "u", "file:///i")
	if err != nil || EventsFed(md) {
		t.Errorf("default source: %v, events-fed %v", err, md != nil && EventsFed(md))
	}
}
