package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

func readFullMetadata(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/metadata_full.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestMetadataReadsEveryField(t *testing.T) {
	m, err := ParseMetadata(readFullMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.FormatVersion != 1 || m.IndexUUID != "3b5c6e2a-8f7d-4c1e-9a0b-1d2e3f405162" ||
		m.TableUUID != "9d8c7b6a-5f4e-4d3c-8b2a-190817263544" || m.LastUpdatedMs != 1764400000123 ||
		m.Location != "s3://warehouse/sales/orders/indexes/by_customer" {
		t.Errorf("header fields: %+v", m)
	}
	if !m.Supported() {
		t.Errorf("type %q should match SCALAR case-insensitively", m.Type)
	}
	if !reflect.DeepEqual(m.IdentityFields, []int{1, 2}) || !reflect.DeepEqual(m.ClusterSpec, []int{1003, 1, 2}) {
		t.Errorf("identity %v cluster %v", m.IdentityFields, m.ClusterSpec)
	}
	if len(m.MaterializedFields) != 3 || len(m.NonMaterializedFields) != 2 {
		t.Fatalf("expression fields: %d materialized, %d non-materialized", len(m.MaterializedFields), len(m.NonMaterializedFields))
	}
	if got := m.MaterializedFields[2].DataType; !got.Equals(iceberg.DecimalTypeOf(12, 2)) {
		t.Errorf("decimal data-type read as %s", got)
	}
	bucket, ok := m.NonMaterializedFields[0].Expr.(Apply)
	if !ok || bucket.Function.Name != "bucket" || !bucket.Function.IsBuiltin() || bucket.Function.Catalog != IcebergFunctionsCatalog {
		t.Errorf("qualified function read as %#v", m.NonMaterializedFields[0].Expr)
	}
	if n, err := bucket.Args[0].(Lit).Int(); err != nil || n != 16 {
		t.Errorf("bucket width literal: %v %v", n, err)
	}
	if ref, ok := bucket.Args[1].(Ref); !ok || ref.ID != 1 {
		t.Errorf("bucket argument: %#v", bucket.Args[1])
	}
	s := m.SnapshotByID(2)
	if s == nil || s.SourceTableSnapshotID != 7002 || s.KeyID != "k1" || s.Properties["streamidx.kafka.offsets"] == "" {
		t.Errorf("snapshot 2: %+v", s)
	}
	if len(m.MetadataLog) != 2 || m.MetadataLog[1].TimestampMs != 1764399000000 {
		t.Errorf("metadata log: %+v", m.MetadataLog)
	}
	k := m.EncryptionKeys[0]
	if k.KeyID != "k1" || k.EncryptedKeyMetadata != "AAECAwQ=" || k.EncryptedByID != "kms-master" || k.Properties["kms"] != "aws" {
		t.Errorf("encryption key: %+v", k)
	}
	if _, ok := m.Extra["x-future-field"]; !ok {
		t.Errorf("unknown top-level field was dropped")
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	m, err := ParseMetadata(readFullMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"type":"SCALAR"`) {
		t.Errorf("writers must write the type in upper case: %s", out)
	}
	back, err := ParseMetadata(out)
	if err != nil {
		t.Fatalf("re-read %s: %v", out, err)
	}
	again, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(again) {
		t.Errorf("second write differs:\n%s\n%s", out, again)
	}
	// Semantic equality with the original file, key by key.
	var orig, written map[string]any
	_ = json.Unmarshal(readFullMetadata(t), &orig)
	_ = json.Unmarshal(out, &written)
	orig["type"] = "SCALAR"
	// A function named by the short string form is written in the
	// canonical form that names its catalog.
	day := orig["non-materialized-fields"].([]any)[1].(map[string]any)["expr"].(map[string]any)
	day["function"] = map[string]any{"catalog": "iceberg_functions", "identifier": []any{"day"}}
	if !reflect.DeepEqual(orig, written) {
		t.Errorf("round trip changed the file:\nwant %v\ngot  %v", orig, written)
	}
}

func TestMetadataMissingOptionalListsReadEmpty(t *testing.T) {
	m, err := ParseMetadata([]byte(`{"format-version":1,"index-uuid":"u","table-uuid":"t","location":"/x",
		"last-updated-ms":1,"type":"SCALAR","identity-fields":[1],"cluster-spec":[1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.MaterializedFields != nil || m.NonMaterializedFields != nil || m.Snapshots != nil || m.MetadataLog != nil || m.EncryptionKeys != nil {
		t.Errorf("optional lists should be empty: %+v", m)
	}
	if m.CurrentSnapshot() != nil {
		t.Errorf("an unbuilt index has no current snapshot")
	}
	out, _ := json.Marshal(m)
	for _, k := range []string{"snapshots", "metadata-log", "materialized-fields", "properties"} {
		if strings.Contains(string(out), `"`+k+`"`) {
			t.Errorf("empty %s written: %s", k, out)
		}
	}
}

func TestMetadataUnsupportedTypeIsIgnorable(t *testing.T) {
	data := []byte(`{"format-version":1,"index-uuid":"u","table-uuid":"t","location":"/x","last-updated-ms":1,
		"type":"vector","dimensions":768,"identity-fields":[1],"cluster-spec":[],"snapshots":[
		{"snapshot-id":5,"source-table-snapshot-id":9,"timestamp-ms":2,"tracking-file":"/x/t.avro"}]}`)
	m, err := ParseMetadata(data)
	if !errors.Is(err, ErrUnsupportedIndexType) {
		t.Fatalf("want ErrUnsupportedIndexType, got %v", err)
	}
	if m == nil || m.IndexUUID != "u" || len(m.Snapshots) != 1 || m.Supported() {
		t.Fatalf("common fields should still be readable: %+v", m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"dimensions":768`, `"type":"VECTOR"`, `"identity-fields":[1]`} {
		if !strings.Contains(string(out), k) {
			t.Errorf("rewriting an unsupported index lost %s: %s", k, out)
		}
	}
}

func TestMetadataRejectsMissingRequiredFields(t *testing.T) {
	base := map[string]any{"format-version": 1, "index-uuid": "u", "table-uuid": "t", "location": "/x",
		"last-updated-ms": 1, "type": "SCALAR", "identity-fields": []int{1}, "cluster-spec": []int{1}}
	for k := range base {
		t.Run(k, func(t *testing.T) {
			c := map[string]any{}
			for kk, v := range base {
				if kk != k {
					c[kk] = v
				}
			}
			data, _ := json.Marshal(c)
			if _, err := ParseMetadata(data); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("missing %s: got %v", k, err)
			}
		})
	}
	bad := `{"format-version":1,"index-uuid":"u","table-uuid":"t","location":"/x","last-updated-ms":1,"type":"SCALAR",
		"identity-fields":[1],"cluster-spec":[1],"snapshots":[{"snapshot-id":1,"timestamp-ms":1,"tracking-file":"f"}]}`
	if _, err := ParseMetadata([]byte(bad)); err == nil || !strings.Contains(err.Error(), "source-table-snapshot-id") {
		t.Errorf("snapshot without source-table-snapshot-id: %v", err)
	}
}

func TestExprJSONForms(t *testing.T) {
	for _, in := range []string{
		`{"type":"reference","id":1}`,
		`{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["bucket"]},"arguments":[16,{"type":"reference","id":1}]}`,
		`{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["truncate"]},"arguments":[{"type":"literal","value":4},{"type":"reference","id":7}]}`,
		`{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["truncate"]},"arguments":[{"type":"literal","value":4,"data-type":"int"},{"type":"reference","id":7}]}`,
		`{"type":"apply","function":{"identifier":["ns","udf"]},"arguments":[]}`,
		`"abc"`,
		`{"type":"literal","value":null}`,
	} {
		e, err := ParseExpr([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		out, err := MarshalExpr(e)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal([]byte(in), &a)
		_ = json.Unmarshal(out, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("round trip %s -> %s", in, out)
		}
	}
	for in, want := range map[string]string{
		`{"type":"reference","term":"customer_id"}`:                    "named references",
		`{"type":"reference","name":"customer_id"}`:                    "named references",
		`{"type":"reference"}`:                                         "integer id",
		`{"type":"apply","arguments":[]}`:                              "needs a function",
		`{"type":"apply","function":"day"}`:                            "list of arguments",
		`{"type":"apply","function":{"identifier":[]},"arguments":[]}`: "non-empty identifier",
		`{"type":"mystery"}`:                                           "unknown expression type",
		`[1,2]`:                                                        "list",
		`{"type":"reference","id":1} x`:                                "trailing",
	} {
		if _, err := ParseExpr([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want error containing %q, got %v", in, want, err)
		}
	}
}

func FuzzParseMetadata(f *testing.F) {
	data, err := os.ReadFile("testdata/metadata_full.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"format-version":1,"index-uuid":"u","table-uuid":"t","location":"/x","last-updated-ms":1,"type":"VECTOR"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata(data)
		if err != nil && !errors.Is(err, ErrUnsupportedIndexType) {
			return
		}
		// Whatever parses must write and parse back to the same file.
		out, err := json.Marshal(m)
		if err != nil {
			return // e.g. an expression field that parsed but cannot be written is reported, not crashed on
		}
		m2, err := ParseMetadata(out)
		if err != nil && !errors.Is(err, ErrUnsupportedIndexType) {
			t.Fatalf("re-read of written metadata failed: %v\n%s", err, out)
		}
		out2, err := json.Marshal(m2)
		if err != nil || string(out) != string(out2) {
			t.Fatalf("unstable round trip: %v\n%s\n%s", err, out, out2)
		}
	})
}

func TestDescribeNamesReferences(t *testing.T) {
	e := NewApply("bucket", IntLit(16), NewApply("truncate", IntLit(3), Ref{ID: 2}))
	got := Describe(e, func(id int) string {
		if id == 2 {
			return "name"
		}
		return ""
	})
	if got != "bucket(16, truncate(3, name))" {
		t.Errorf("Describe: %s", got)
	}
	if got := Describe(Ref{ID: 9}, func(int) string { return "" }); got != "ref(9)" {
		t.Errorf("unknown reference: %s", got)
	}
}

func TestParseMetadataRefusesOtherFormatVersions(t *testing.T) {
	doc := func(version string) []byte {
		return []byte(`{"format-version":` + version + `,"index-uuid":"u","table-uuid":"t","location":"/x","last-updated-ms":1,
			"type":"SCALAR","identity-fields":[1],"cluster-spec":[1]}`)
	}
	m, err := ParseMetadata(doc("2"))
	if m != nil || !errors.Is(err, ErrUnknownFormatVersion) || !strings.Contains(err.Error(), "format-version 2") {
		t.Errorf("version 2: %v, %v; want no metadata and ErrUnknownFormatVersion naming the version", m, err)
	}
	for _, v := range []string{"0", "-1", `"1"`, "1.5"} {
		if m, err := ParseMetadata(doc(v)); err == nil || errors.Is(err, ErrUnknownFormatVersion) {
			t.Errorf("version %s: %v, %v; want a parse error", v, m, err)
		}
	}
	if _, err := ParseMetadata(doc("1")); err != nil {
		t.Errorf("version 1: %v", err)
	}
}

// TestMetadataRequiresSubFields: the required fields of a snapshot, a
// metadata-log entry and an encryption key are required on read too; a
// missing one is not read as 0 or "".
func TestMetadataRequiresSubFields(t *testing.T) {
	head := `{"format-version":1,"index-uuid":"u","table-uuid":"t","location":"s3://b/x","last-updated-ms":1,"type":"SCALAR",
		"identity-fields":[1],"cluster-spec":[1],`
	snap := `{"snapshot-id":1,"source-table-snapshot-id":7,"timestamp-ms":1,"tracking-file":"s3://b/x/t.avro"}`
	for _, c := range []struct{ name, body, want string }{
		{"snapshot-id", `"snapshots":[{"source-table-snapshot-id":7,"timestamp-ms":1,"tracking-file":"f"}]`, `snapshot 0 has no "snapshot-id"`},
		{"timestamp-ms", `"snapshots":[{"snapshot-id":1,"source-table-snapshot-id":7,"tracking-file":"f"}]`, `snapshot 0 has no "timestamp-ms"`},
		{"source-table-snapshot-id", `"snapshots":[{"snapshot-id":1,"timestamp-ms":1,"tracking-file":"f"}]`, `no "source-table-snapshot-id"`},
		{"tracking-file", `"snapshots":[{"snapshot-id":1,"source-table-snapshot-id":7,"timestamp-ms":1}]`, `no "tracking-file"`},
		{"null snapshot-id", `"snapshots":[{"snapshot-id":null,"source-table-snapshot-id":7,"timestamp-ms":1,"tracking-file":"f"}]`, `no "snapshot-id"`},
		{"snapshot not an object", `"snapshots":[7]`, `snapshots`},
		{"metadata-log {}", `"snapshots":[` + snap + `],"metadata-log":[{}]`, `metadata-log entry 0 has no "metadata-file"`},
		{"metadata-log timestamp", `"metadata-log":[{"metadata-file":"s3://b/x/m.json"}]`, `metadata-log entry 0 has no "timestamp-ms"`},
		{"encryption-keys {}", `"encryption-keys":[{}]`, `encryption-keys entry 0 has no "key-id"`},
		{"encrypted-key-metadata", `"encryption-keys":[{"key-id":"k"}]`, `no "encrypted-key-metadata"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMetadata([]byte(head + c.body + "}"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	ok := head + `"snapshots":[` + snap + `],"metadata-log":[{"metadata-file":"s3://b/x/m.json","timestamp-ms":1}],` +
		`"encryption-keys":[{"key-id":"k","encrypted-key-metadata":"AA=="}]}`
	if _, err := ParseMetadata([]byte(ok)); err != nil {
		t.Errorf("complete metadata: %v", err)
	}
}

// TestExprJSONInterop: every function reference form of the expressions
// spec's Appendix B reads, and is written back in the canonical form that
// names the iceberg_functions catalog; a literal keeps its data-type.
func TestExprJSONInterop(t *testing.T) {
	canonical := `{"type":"apply","function":{"catalog":"iceberg_functions","identifier":["bucket"]},"arguments":[16,{"type":"reference","id":1}]}`
	for _, fn := range []string{`"bucket"`, `["bucket"]`, `{"identifier":["bucket"]}`, `{"catalog":null,"identifier":["bucket"]}`,
		`{"catalog":"iceberg_functions","identifier":["bucket"]}`} {
		in := `{"type":"apply","function":` + fn + `,"arguments":[16,{"type":"reference","id":1}]}`
		e, err := ParseExpr([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", fn, err)
			continue
		}
		if got, err := ResultType(e, func(int) (iceberg.Type, bool) { return iceberg.PrimitiveTypes.Int64, true }); err != nil || !got.Equals(iceberg.PrimitiveTypes.Int32) {
			t.Errorf("%s: type %v, %v", fn, got, err)
		}
		out, _ := MarshalExpr(e)
		if string(out) != canonical {
			t.Errorf("%s written as %s, want %s", fn, out, canonical)
		}
	}
	long := func(int) (iceberg.Type, bool) { return iceberg.PrimitiveTypes.Int64, true }
	for in, want := range map[string]string{
		`{"type":"apply","function":["ns","bucket"],"arguments":[16,{"type":"reference","id":1}]}`:                                        `function "ns.bucket": only functions of the iceberg_functions catalog`,
		`{"type":"apply","function":{"catalog":"spark","identifier":["bucket"]},"arguments":[16,{"type":"reference","id":1}]}`:            `function "spark.bucket"`,
		`{"type":"apply","function":"void","arguments":[{"type":"reference","id":1}]}`:                                                    `"void" is not an iceberg_functions function`,
		`{"type":"apply","function":"bucket","arguments":[{"type":"literal","value":16,"data-type":"long"},{"type":"reference","id":1}]}`: "the spec's parameter is an int",
	} {
		e, err := ParseExpr([]byte(in))
		if err != nil {
			t.Errorf("%s: parse: %v", in, err)
			continue
		}
		if _, err := ResultType(e, long); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", in, err, want)
		}
	}
	lit := `{"type":"literal","value":"2026-01-01","data-type":"date"}`
	e, err := ParseExpr([]byte(lit))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := MarshalExpr(e); string(out) != lit {
		t.Errorf("literal with data-type written as %s", out)
	}
}

// TestPartitionColumnIsValidButNotEvaluated: _partition is a metadata
// column the spec allows in expressions, so a definition using it is
// valid; streamidx cannot compute the partition struct and refuses to
// build or read the index with a message saying so.
func TestPartitionColumnIsValidButNotEvaluated(t *testing.T) {
	doc := `{"format-version":1,"index-uuid":"u","table-uuid":"t","location":"s3://b/x","last-updated-ms":1,"type":"SCALAR",
		"identity-fields":[1],"cluster-spec":[1],"materialized-fields":[{"field-id":900000,"type":"expr-value",
		"data-type":{"type":"struct","fields":[]},"expr":{"type":"reference","id":2147483642}}]}`
	md, err := ParseMetadata([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64})
	for _, s := range []*iceberg.Schema{nil, schema} {
		if err := Validate(md, s); err != nil {
			t.Errorf("validate (schema %v): %v", s != nil, err)
		}
	}
	_, err = NewIndexSchema(md, schema)
	if !errors.Is(err, ErrUnsupportedExpression) || !strings.Contains(err.Error(), "_partition") {
		t.Errorf("NewIndexSchema: %v, want ErrUnsupportedExpression naming _partition", err)
	}
}

// TestExprDepthLimitIsShared: what Validate accepts, ParseExpr reads back;
// one application deeper is refused by both.
func TestExprDepthLimitIsShared(t *testing.T) {
	nest := func(n int) Expr {
		var e Expr = Ref{ID: 1}
		for range n {
			e = NewApply("identity", e)
		}
		return e
	}
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64})
	md := func(e Expr) *Metadata {
		return &Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "s3://b/x", Type: TypeScalar,
			IdentityFields: []int{1}, ClusterSpec: []int{1},
			MaterializedFields: []ExprField{{FieldID: 900000, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: e}}}
	}
	deepest := nest(MaxExprDepth)
	if err := Validate(md(deepest), schema); err != nil {
		t.Fatalf("%d deep: %v", MaxExprDepth, err)
	}
	data, _ := MarshalExpr(deepest)
	if _, err := ParseExpr(data); err != nil {
		t.Errorf("reading back %d deep: %v", MaxExprDepth, err)
	}
	tooDeep := nest(MaxExprDepth + 1)
	if err := Validate(md(tooDeep), schema); !errors.Is(err, ErrExprDepth) {
		t.Errorf("%d deep: %v, want ErrExprDepth", MaxExprDepth+1, err)
	}
	data, _ = MarshalExpr(tooDeep)
	if _, err := ParseExpr(data); err == nil {
		t.Errorf("reading %d deep: no error", MaxExprDepth+1)
	}
}

// TestMetadataCloneSharesNothingChangeable: a clone equals its original,
// and changing every list and map of the clone leaves the original as it
// was (the store hands out clones of the metadata it keeps parsed).
func TestMetadataCloneSharesNothingChangeable(t *testing.T) {
	m, err := ParseMetadata(readFullMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Snapshots) > 0 && m.Snapshots[0].Properties == nil {
		m.Snapshots[0].Properties = map[string]string{"written-by": "test"}
	}
	if len(m.Snapshots) == 0 || len(m.EncryptionKeys) == 0 || len(m.EncryptionKeys[0].Properties) == 0 ||
		len(m.Properties) == 0 || len(m.MetadataLog) == 0 || len(m.IdentityFields) == 0 || len(m.MaterializedFields) == 0 || len(m.ClusterSpec) == 0 {
		t.Fatal("the full metadata sample lacks a part this test changes")
	}
	before, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	if got, err := c.MarshalJSON(); err != nil || !bytes.Equal(got, before) {
		t.Fatalf("clone differs from its original (%v):\n%s\n%s", err, got, before)
	}
	c.IdentityFields[0]++
	c.MaterializedFields[0].FieldID++
	c.ClusterSpec[0]++
	c.Properties["changed"] = "yes"
	c.Snapshots[0].SnapshotID++
	c.Snapshots[0].Properties["changed"] = "yes"
	c.MetadataLog[0].TimestampMs++
	c.EncryptionKeys[0].KeyID = "changed"
	c.EncryptionKeys[0].Properties["changed"] = "yes"
	if c.Extra == nil {
		c.Extra = map[string]json.RawMessage{}
	}
	c.Extra["changed"] = json.RawMessage(`1`)
	c.Snapshots = append(c.Snapshots, Snapshot{SnapshotID: 1})
	after, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, before) {
		t.Errorf("changing the clone changed the original:\n%s\nwas\n%s", after, before)
	}
}
